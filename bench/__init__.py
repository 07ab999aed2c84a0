"""mule's benchmarks: run each as a script (`python bench/NAME.py`) or `python -m bench.NAME`."""
