"""The coding tools, `read`, `ls`, `grep` and `bash`, as a library for any mule run.

Each tool works inside a `Workspace`: paths resolve against its root and, when it is confined (the
default), may not leave it, symlinks included. Every failure the model should see (a missing file,
a path outside the root, a binary file, a bad regex, a declined or failing command) comes back as
an `is_error` result, never as a crash of the run. Output is bounded (`MAX_OUTPUT_BYTES`) and a cut
says how to get the rest. `read`, `ls` and `grep` only look and are replay-safe; `bash` is
replay-unsafe, asks `confirm` before each command and is not a sandbox.

    import anyio

    import mule
    from mule.pi import UserMessage, text_of
    from mule.pi.models import get_model
    from mule.tools import Workspace, coding_tools


    async def ask(command: str) -> bool:
        return await anyio.to_thread.run_sync(input, f"run {command!r}? [y/N] ") == "y"


    async def main() -> None:
        model = get_model("openai", "gpt-4o-mini")  # its key comes from OPENAI_API_KEY
        assert model is not None
        tools = coding_tools(Workspace.at("."), ("read", "ls", "grep", "bash"), confirm=ask)
        inp = mule.MuleRunInput(
            model=model,
            system_prompt="Answer from the files in the working directory.",
            messages=(UserMessage("What does this project do?", 0),),
            tools=tools,
        )
        outcome = await mule.run(inp, lambda event, signal: None)
        print(text_of(outcome.message))


    anyio.run(main)

`examples/coding_tools.py` runs the same with a scripted model, offline.

The functions behind the tools (`read_file`, `list_dir`, `grep_files`, `run_command`) are plain
calls returning a `MuleToolResult`, and `make_tool` wraps any async body the same way.
"""

from mule.tools._bash import (
    BASH_DEFAULT_TIMEOUT_S,
    BASH_MAX_TIMEOUT_S,
    Confirm,
    bash_tool,
    run_command,
)
from mule.tools._coding import READ_ONLY_TOOL_NAMES, TOOL_NAMES, coding_tools
from mule.tools._grep import grep_files, grep_tool
from mule.tools._ls import list_dir, ls_tool
from mule.tools._read import read_file, read_tool
from mule.tools._tool import Authorize, ToolBody, make_tool
from mule.tools._workspace import (
    MAX_OUTPUT_BYTES,
    SKIPPED_DIRS,
    Workspace,
    WorkspaceLike,
    is_binary,
)

__all__ = [
    "BASH_DEFAULT_TIMEOUT_S",
    "BASH_MAX_TIMEOUT_S",
    "MAX_OUTPUT_BYTES",
    "READ_ONLY_TOOL_NAMES",
    "SKIPPED_DIRS",
    "TOOL_NAMES",
    "Authorize",
    "Confirm",
    "ToolBody",
    "Workspace",
    "WorkspaceLike",
    "bash_tool",
    "coding_tools",
    "grep_files",
    "grep_tool",
    "is_binary",
    "list_dir",
    "ls_tool",
    "make_tool",
    "read_file",
    "read_tool",
    "run_command",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
