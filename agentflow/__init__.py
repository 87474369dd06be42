"""agentflow: a small synchronous LLM agent whose risky tool calls wait for a human.

The contract is SPEC.md (its numbered rules are what "SPEC R7" cites); the names below
are the ones its §3 puts in a caller's hands. Everything else is reachable by module path, as in ``requests``:
``agentflow.function_invoking.LoopState``, ``agentflow.approvals.ApprovalLedger``,
``agentflow.canonical.arguments_digest``, ``agentflow.errors.ProviderTimeoutError`` …
"""

from .agent import ChatClientAgent, Context, ContextProvider
from .errors import AgentflowError, ApprovalError, ProviderError, SessionError
from .function_invoking import FunctionInvokingChatClient
from .openai_client import OpenAIChatClient
from .policy import ApprovalPolicy
from .session import AgentSession
from .tools import ApprovalRequiredTool, FunctionTool, Tool, tool
from .types import (AgentResponseUpdate, AgentRunOptions, ChatMessage, Finish,
                    FinishReason, MessageRole, ReasoningDelta, TextDelta,
                    ToolApprovalRequest, ToolApprovalResponse, ToolCallArgs, ToolCallEnd,
                    ToolCallStart, ToolResult)

__version__ = "0.1.0"

__all__ = [
    # running an agent
    "ChatClientAgent", "OpenAIChatClient", "FunctionInvokingChatClient", "AgentSession",
    "AgentRunOptions", "Context", "ContextProvider",
    # messages
    "ChatMessage", "MessageRole",
    # what a run yields
    "AgentResponseUpdate", "TextDelta", "ReasoningDelta", "ToolCallStart", "ToolCallArgs",
    "ToolCallEnd", "ToolResult", "ToolApprovalRequest", "Finish", "FinishReason",
    # answering approvals
    "ToolApprovalResponse", "ApprovalPolicy",
    # tools
    "Tool", "FunctionTool", "ApprovalRequiredTool", "tool",
    # errors
    "AgentflowError", "ApprovalError", "ProviderError", "SessionError",
]
