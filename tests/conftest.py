import pytest

from agentflow import ChatClientAgent, OpenAIChatClient
from agentflow.replay import ReplayServer


@pytest.fixture
def make_agent():
    """``make_agent(bodies, **agent_kwargs) -> (agent, server)``: a ``ChatClientAgent``
    whose ``OpenAIChatClient`` talks real HTTP to a loopback ``ReplayServer`` serving
    ``bodies`` in order. Servers stop at the end of the test."""
    servers = []

    def factory(bodies, **agent_kwargs):
        server = ReplayServer(bodies).start()
        servers.append(server)
        client = OpenAIChatClient(model="test-model", base_url=server.base_url,
                                  api_key="sk-test", max_retries=0)  # retries: test_retries.py
        return ChatClientAgent(client, **agent_kwargs), server

    yield factory
    for server in servers:
        server.stop()
