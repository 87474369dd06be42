"""The README's embedding example runs as written, against a replay server."""

import os
import re
import subprocess
import sys
from pathlib import Path

from agentflow.testing.replay import ReplayServer, chat_stream

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_pauses_asks_and_resumes():
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    bodies = [chat_stream(text="Checking.", tool_calls=[
                  ("call_1", "run_command", '{"command": "echo 42 GB free"}')]),
              chat_stream(text="You have 42 GB free.")]
    with ReplayServer(bodies) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-readme"}
        out = subprocess.run([sys.executable, "-c", code], input="y\n", capture_output=True,
                             text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert "Checking." in out.stdout
        assert "run {'command': 'echo 42 GB free'}? [y/N]" in out.stdout
        assert out.stdout.rstrip().endswith("You have 42 GB free.")
        # the approved command really ran, and its output went back to the model
        tool_message = server.requests[1].json["messages"][-1]
        assert tool_message == {"role": "tool", "content": "42 GB free\n",
                                "tool_call_id": "call_1"}
        assert server.requests[0].headers["authorization"] == "Bearer sk-readme"
