#!/bin/sh
# A tour of the `mule` command (pip install 'mule[cli]'). Each line stands alone.
set -eu

# No key, no network: a scripted model drives the real read/ls/grep tools on this directory.
mule demo

# The registry (pi-ai's catalogue plus ~/.pi/agent/models.json); "key set" marks usable providers.
mule models --provider anthropic

# A real model: streams thinking, text and tool activity; bash asks before running.
ANTHROPIC_API_KEY=... mule run "What does this project do?" --model anthropic/claude-sonnet-4-5

# A local OpenAI-compatible server (Ollama, llama.cpp): an unknown provider plus --base-url.
mule run "Summarise README.md" --model ollama/qwen2.5-coder --base-url http://localhost:11434/v1

# One mule event per line, for scripts (message_update lines can be large).
mule run "List the Python files" --model ollama/qwen2.5-coder \
  --base-url http://localhost:11434/v1 --tools ls,grep --json > events.jsonl

# Durable runs: Ctrl-C cancels honestly (exit 130); resume later from the journal.
mule run "Tidy the changelog" --model openai/gpt-4o --journal runs.db
mule journal list --journal runs.db
mule journal show RUN_ID --journal runs.db
mule run --model openai/gpt-4o --journal runs.db --resume RUN_ID
