"""agentflow: a small synchronous LLM agent whose risky tool calls wait for a human.

The contract is SPEC.md (rules R1…R15); the names below are its §3.
"""

from .agent import ChatClientAgent
from .context import Context, ContextProvider
from .errors import (AgentflowError, ApprovalError, IncompleteStreamError,
                     LoopStateError, ProviderError, ProviderTimeoutError)
from .function_invoking import FunctionInvokingChatClient, LoopEvent, LoopState
from .openai_client import OpenAIChatClient
from .approvals import ApprovalLedger, AuditRecord, PendingApproval, arguments_digest
from .session import AgentSession, SessionError, SessionIntegrityError, SessionLockedError
from .tools import ApprovalRequiredTool, FunctionTool, Tool, tool
from .types import (AgentResponseUpdate, AgentRunOptions, ChatMessage, Finish,
                    FinishReason, MessageRole, ReasoningDelta, TextDelta,
                    ToolApprovalRequest, ToolApprovalResponse, ToolCall, ToolCallArgs,
                    ToolCallEnd, ToolCallStart, ToolResult, Usage)

__version__ = "0.1.0"

__all__ = [
    "AgentResponseUpdate", "AgentRunOptions", "AgentSession", "AgentflowError",
    "ApprovalError", "ApprovalLedger", "ApprovalRequiredTool", "AuditRecord",
    "PendingApproval", "SessionError", "SessionIntegrityError", "SessionLockedError",
    "arguments_digest", "ChatClientAgent", "ChatMessage", "Context",
    "ContextProvider", "Finish", "FinishReason", "FunctionInvokingChatClient",
    "FunctionTool", "IncompleteStreamError", "LoopEvent", "LoopState", "LoopStateError",
    "MessageRole", "OpenAIChatClient", "ProviderError", "ProviderTimeoutError",
    "ReasoningDelta", "TextDelta", "Tool", "ToolApprovalRequest", "ToolApprovalResponse",
    "ToolCall", "ToolCallArgs", "ToolCallEnd", "ToolCallStart", "ToolResult", "Usage",
    "tool",
]
