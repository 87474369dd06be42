# Expected assembled results of the recorded provider streams in
# SPEC fixtures/streams/*.sse (SPEC section 6), worked out independently from
# the raw bytes.
#
# Only lengths, sha256 (of the UTF-8 text) and 24-character heads are stored;
# the fixture text itself stays out of the repository.
#
# tool_calls: [id, name, arguments]; arguments is the exact assembled JSON text,
# except when it is long model output (over 80 characters), where it is a dict
# {"len": ..., "sha256": ..., "head": ...} built like the text fields.
# usage: [prompt_tokens, completion_tokens, total_tokens], or None.
# finish_reason is None when an error is raised; "error" then describes it.
#

EXPECTED = {
    # Later deltas re-send id "" and type: first non-empty id/type kept, never
    # concatenated. content null skipped. No [DONE]; finish_reason tool_calls arrived so
    # the end is fine. usage from the final chunk with empty choices (usage:null on
    # earlier chunks is not a usage).
    'alibaba-qwen-tool-empty-id-resent.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_eee11723464a4b9eb8cee71d', 'weather', '{"location": "San Francisco"}']],
        'finish_reason': 'tool_calls',
        'usage': [295, 22, 317],
        'error': None,
    },
    # Text, then one call whose index is 1 (slot keyed by index; it is the only call). The
    # file ends 'data: [DONE]\n' WITHOUT the closing blank line, so by WHATWG that event
    # is discarded: no [DONE] seen, but finish_reason tool_calls arrived -> fine. No usage
    # anywhere.
    'anthropic-compat-text-then-tool-index1.sse': {
        'text_len': 11,
        'text_sha256': '3f1e3d85c76a04cc684b8c21299dfee250c1aa872dfe574bf47cac311c25cd76',
        'text_head': 'Reading it.',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['toolu_sanitized', 'read_file', '{"path": "a.txt"}']],
        'finish_reason': 'tool_calls',
        'usage': None,
        'error': None,
    },
    # First chunk has empty choices + prompt_filter_results (skipped). No [DONE]; finish
    # stop arrived. usage from last chunk (empty choices).
    'azure-model-router-text.sse': {
        'text_len': 19,
        'text_sha256': '53f836c9fbdabf17eb44223ac5a576d45dae9abf3f6202b957726864c4506ae5',
        'text_head': 'Capital of Denmark.',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [15, 78, 93],
        'error': None,
    },
    # A choice with no delta at all after the finish chunk (content_filter_offsets) is
    # skipped. Nothing was filtered: finish_reason is 'stop' (not content_filter). No
    # [DONE]; usage from last chunk (empty choices).
    'azure-text-content-filter.sse': {
        'text_len': 11,
        'text_sha256': 'a591a6d40bf420404a011733cfb7b190d62c65bf0bcda32b57b277d9ad9f146e',
        'text_head': 'Hello World',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [15, 5, 20],
        'error': None,
    },
    # reasoning_content -> reasoning, then content -> text; content null on reasoning
    # chunks. usage only non-null on the finish chunk. [DONE] present.
    'deepseek-reasoner-stream.sse': {
        'text_len': 40,
        'text_sha256': 'cf0e60278f7fbdc36fdaf5630f08ec831d6d051d936563171e86258ad95ae574',
        'text_head': 'Hello there! 😊 How can I',
        'reasoning_len': 882,
        'reasoning_sha256': 'd29146ea4f40dfde7b6155babd3d948397e1b174950e603ef18518f0ff85585a',
        'reasoning_head': 'Hmm, the user just said ',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [6, 212, 218],
        'error': None,
    },
    # reasoning_content then content. usage on the finish chunk (cache-token fields
    # ignored). No [DONE]; finish stop arrived.
    'deepseek-reasoning-text.sse': {
        'text_len': 41,
        'text_sha256': 'acfc289b7bcb2def6e96d0d7668ec9861b54a549d966a301e682dd34f1ff67ae',
        'text_head': 'There are **3** “r”s in ',
        'reasoning_len': 285,
        'reasoning_sha256': '90e8018d6f35124522ddd3caf1dbb361c47ff81a00814017ef9178295f032a1d',
        'reasoning_head': 'We need answer simple. N',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [97, 106, 203],
        'error': None,
    },
    # reasoning_content, then one call in fragments by index 0. usage on the finish chunk.
    # No [DONE]; finish tool_calls arrived.
    'deepseek-reasoning-tool.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 80,
        'reasoning_sha256': '0324d4a77ac2c15e1033af5b0edd609d51566668d75464673efe6c9b3c4ca823',
        'reasoning_head': 'The user asks about the ',
        'tool_calls': [['call_00_IhCAliIHtM9gKpgfqbBV9873', 'weather', '{"location": "San Francisco"}']],
        'finish_reason': 'tool_calls',
        'usage': [374, 61, 435],
        'error': None,
    },
    # Reasoning deltas ('reasoning' field), then an SSE 'event: error' -> ProviderError
    # raised after the reasoning was yielded; no finish, no [DONE], no usage. error.code
    # is 'tool_use_failed' (status_code 400 is a separate field).
    'groq-event-error-no-done.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 412,
        'reasoning_sha256': '42abcfd444c13a252daf3a905d1959fe1881cf8631c56e434cf9dd844576524f',
        'reasoning_head': 'We need to call the tool',
        'tool_calls': [],
        'finish_reason': None,
        'usage': None,
        'error': {'kind': 'ProviderError', 'message_contains': 'Tool call validation failed', 'code': 'tool_use_failed'},
    },
    # 'reasoning' field -> reasoning, then text. usage present both as usage and
    # x_groq.usage (same values) on the finish chunk.
    'groq-final-text.sse': {
        'text_len': 57,
        'text_sha256': 'f61c3c07ce56563107c84af5c4240577447342695396329feab5fdf44a9364ef',
        'text_head': 'The tool returned the ex',
        'reasoning_len': 176,
        'reasoning_sha256': '82eb5729bf9d4cfeb2a33323e66f174cf72aef9290c55b45cc26bd36c039b5cc',
        'reasoning_head': 'The user wants to test e',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [339, 58, 397],
        'error': None,
    },
    # 'reasoning' field -> reasoning, then text. usage both top-level and x_groq.usage
    # (identical). No [DONE]; finish stop arrived.
    'groq-reasoning-text.sse': {
        'text_len': 347,
        'text_sha256': 'c19609678caf916a806eac1d97cf4bf8fd56aeaa5aba0a252aab48fe7e2ae8b4',
        'text_head': 'The word **"strawberry"*',
        'reasoning_len': 2952,
        'reasoning_sha256': 'a8661d5bd141de42fe1683760783adf1557a8c14802bb4c7cfffcfb3d78f0943',
        'reasoning_head': 'Okay, let me try to figu',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [17, 1107, 1124],
        'error': None,
    },
    # Reasoning, then the whole call in one delta (index after function). usage from usage
    # / x_groq.usage (identical).
    'groq-tool-after-error.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 92,
        'reasoning_sha256': '30d4b14ce07615fa7bd72ead58fda1880e3de16a5ba06647f1e7085649d05011',
        'reasoning_head': 'We need to call the func',
        'tool_calls': [['fc_bfb39741-3748-4def-9886-a93fc9c64a90', 'get_something_by_name', '{"name":"example"}']],
        'finish_reason': 'tool_calls',
        'usage': [304, 49, 353],
        'error': None,
    },
    # Whole call in one delta, index after function, arguments '{}'. usage both top-level
    # and x_groq.usage (identical). No [DONE]; finish tool_calls arrived.
    'groq-tool-whole.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['tk85n1k4m', 'weather', '{}']],
        'finish_reason': 'tool_calls',
        'usage': [210, 15, 225],
        'error': None,
    },
    # Second delta re-sends type and an EMPTY name: first non-empty name kept. Delta
    # carries a stray 'index' key (ignored). Call, finish and usage on the last chunk. No
    # [DONE].
    'mistral-api-incremental-tool-empty-name.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['chatcmpl-tool-9f149c74c42f265b', 'webSearchTool', '{"query": "current Berlin weather"}']],
        'finish_reason': 'tool_calls',
        'usage': [171, 14, 185],
        'error': None,
    },
    # content is a list of typed parts. A thinking part is {type:'thinking',
    # thinking:[{type:'text', text:...}], closed?}: its reasoning text is the
    # concatenation of the 'text' of the inner type=='text' items of the 'thinking' list
    # ('closed' ignored). type=='text' parts -> text. The last list holds a thinking part
    # AND a text part; then a plain string content. usage on the finish chunk. No [DONE].
    'mistral-content-array-thinking.sse': {
        'text_len': 3,
        'text_sha256': 'a934c244755c66aebb0d6f9f5687038ffae8f00b00b28b4e17521016393f38b9',
        'text_head': '391',
        'reasoning_len': 335,
        'reasoning_sha256': '9d72d3d51f4068ab809414e0ea1006ebbfe71bfb33c39a1de017fe33260957f4',
        'reasoning_head': 'Okay, the user is asking',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [28, 139, 167],
        'error': None,
    },
    # Empty choices (usage:null) in the middle: skipped. usage on the finish chunk. No
    # [DONE].
    'mistral-empty-choices-midstream.sse': {
        'text_len': 6,
        'text_sha256': '334d016f755cd6dc58c53a86e183882f8ec14f52fb05345887c8a5edd42c87b7',
        'text_head': 'Hello!',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [5, 3, 8],
        'error': None,
    },
    # Call with no index and no type: a new non-empty id opens a slot. Call, finish and
    # usage in one chunk. No [DONE].
    'mistral-tool-no-index.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['gSIMJiOkT', 'weather', '{"location": "San Francisco"}']],
        'finish_reason': 'tool_calls',
        'usage': [124, 22, 146],
        'error': None,
    },
    # Two parallel calls, index 0 then 1. usage from the empty-choices chunk before
    # [DONE].
    'openai-agent-step1.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_q2UyBRP7eXNTzAoR8lEhjc9Z', 'get_country', '{}'], ['call_b51ijcpFkDiTQG1bQzsrmtW5', 'get_product_name', '{}']],
        'finish_reason': 'tool_calls',
        'usage': [364, 40, 404],
        'error': None,
    },
    # One call in fragments. usage from the empty-choices chunk.
    'openai-agent-step2.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_LwxJUB9KppVyogRRLQsamRJv', 'get_weather', '{"city":"Mexico City"}']],
        'finish_reason': 'tool_calls',
        'usage': [423, 15, 438],
        'error': None,
    },
    # One call whose arguments arrive in ~50 fragments. The arguments are long model
    # output, so they are given as {len, sha256, head} instead of a literal (see header).
    'openai-agent-step3.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_CCGIWaMeYWmxOQ91orkmTvzn', 'final_result', {'len': 229, 'sha256': 'abd202e0de14cd2a67b3f836af19abafb1fa78ae4088ba24b0184b75b0e57cff', 'head': '{"answers":[{"label":"Ca'}]],
        'finish_reason': 'tool_calls',
        'usage': [448, 62, 510],
        'error': None,
    },
    # n=3: only choice index 0 is assembled (choices 1 and 2 ignored). usage from the
    # empty-choices chunk.
    'openai-gpt4o-n3-refusal.sse': {
        'text_len': 53,
        'text_sha256': '9a2caa6d70e9f4bee9a5504363785d4ca5ce72c51ee139bea9cb213c94c7c41a',
        'text_head': '{"city":"San Francisco",',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [79, 42, 121],
        'error': None,
    },
    # Single call in fragments. usage from the empty-choices chunk.
    'openai-gpt4o-nonstrict-tool.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_4XzlGBLtUe9dy3GVNV4jhq7h', 'get_weather', '{"city":"New York City"}']],
        'finish_reason': 'tool_calls',
        'usage': [44, 16, 60],
        'error': None,
    },
    # Two parallel calls, index 0 then 1, order of first appearance. usage from the empty-
    # choices chunk.
    'openai-gpt4o-parallel-tools.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_JMW1whyEaYG438VE1OIflxA2', 'GetWeatherArgs', '{"city": "Edinburgh", "country": "GB", "units": "c"}'], ['call_DNYTawLBoN8fj3KN6qU9N1Ou', 'get_stock_price', '{"ticker": "AAPL", "exchange": "NASDAQ"}']],
        'finish_reason': 'tool_calls',
        'usage': [149, 60, 209],
        'error': None,
    },
    # content null, then 'refusal' deltas: refusal text counts as text. usage from the
    # empty-choices chunk.
    'openai-gpt4o-refusal.sse': {
        'text_len': 44,
        'text_sha256': '401a711e087e2b175158e90c32a556eeb88a20fe76c6ca3de9e48b74d349861c',
        'text_head': "I'm sorry, I can't assis",
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [79, 11, 90],
        'error': None,
    },
    # Role+header in one chunk, arguments in fragments. usage from the empty-choices
    # chunk.
    'openai-gpt4o-single-tool.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_c91SqDXlYFuETYv8mUHzz6pp', 'GetWeatherArgs', '{"city":"Edinburgh","country":"UK","units":"c"}']],
        'finish_reason': 'tool_calls',
        'usage': [76, 24, 100],
        'error': None,
    },
    # Single call in fragments. usage from the empty-choices chunk.
    'openai-gpt4o-strict-tool.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_CTf1nWJLqSeRgDqaCG27xZ74', 'get_weather', '{"city":"San Francisco","state":"CA"}']],
        'finish_reason': 'tool_calls',
        'usage': [48, 19, 67],
        'error': None,
    },
    # Text, then one call. usage from the empty-choices chunk. No [DONE]; finish
    # tool_calls arrived.
    'openai-text-then-tool-step1.sse': {
        'text_len': 8,
        'text_sha256': 'a0b340204ce145fb9fb84445f1e91da40c5b844f9f7a94a681b48540a83e2b4c',
        'text_head': 'PRE_TOOL',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['call_NZa7xqfefoaMI2YYHowVXVlU', 'weather', '{}']],
        'finish_reason': 'tool_calls',
        'usage': [58, 12, 70],
        'error': None,
    },
    # Text only. usage from the empty-choices chunk. No [DONE]; finish stop arrived.
    'openai-text-then-tool-step2.sse': {
        'text_len': 9,
        'text_sha256': '832658967f42ab96e9b419b55095e79295c8c7349a86d620ba2c741965bb3beb',
        'text_head': 'POST_TOOL',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [86, 2, 88],
        'error': None,
    },
    # Long text. usage from the final empty-choices chunk (usage:null on all others). No
    # [DONE]; finish stop arrived.
    'openai-text.sse': {
        'text_len': 1724,
        'text_sha256': '53b2d9e583d02b3ff0a0e83be5beb61ce1d16ccddc7ab9f033e72ec8ef55c8e4',
        'text_head': '**Holiday Name:** Harmon',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [16, 300, 316],
        'error': None,
    },
    # Keepalive ':' comments skipped. 'reasoning' -> reasoning (reasoning_details ignored,
    # not double-counted). finish 'length' twice, then a chunk with an 'error' object ->
    # ProviderError (code is the int 400) after the reasoning; the [DONE] after it is
    # never reached. That error chunk also carries usage 43/10/53, but since the call
    # fails no Finish/usage is reported -> usage None (judgement call).
    'openrouter-error-in-chunk.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 42,
        'reasoning_sha256': '2366fab4e65dad4414d5ddca31844ba32657ef5645c54586688f4faa64c824af',
        'reasoning_head': 'We need to respond to a ',
        'tool_calls': [],
        'finish_reason': None,
        'usage': None,
        'error': {'kind': 'ProviderError', 'message_contains': 'Token limit reached', 'code': 400},
    },
    # Role on every delta. usage on a chunk after the finish chunk. [DONE].
    'openrouter-fireworks-after-tool.sse': {
        'text_len': 63,
        'text_sha256': '4fd069866def597b94cbdc9d44aa9fa19c23fd804ad2b2c890048d6e5badf3cf',
        'text_head': 'The installed version of',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [105, 16, 121],
        'error': None,
    },
    # Role on every delta. usage on a chunk after the finish chunk. [DONE].
    'openrouter-kimi-after-tool.sse': {
        'text_len': 52,
        'text_sha256': 'f7ad6e9a36858d7945d632f414df34370cb0e00e727a97451985223bcbbba8eb',
        'text_head': 'The current version of *',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [107, 15, 122],
        'error': None,
    },
    # The call header (index 0, id '0', type, name) is sent twice in full: first non-empty
    # values kept, never concatenated; arguments '' + '{}' = '{}'. No finish_reason at all
    # but [DONE] arrived -> 'tool_calls'.
    'openrouter-kimi-tool-header-twice.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['0', 'llm_version', '{}']],
        'finish_reason': 'tool_calls',
        'usage': [57, 17, 74],
        'error': None,
    },
    # Arguments '{}' in the first (only) delta. No finish_reason, [DONE] arrived ->
    # 'tool_calls'.
    'openrouter-novita-args-first.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [['0', 'llm_version', '{}']],
        'finish_reason': 'tool_calls',
        'usage': [57, 17, 74],
        'error': None,
    },
    # ':' comments between events; role on every delta. The only reasoning is 'reasoning':
    # null plus an encrypted reasoning_details blob -> no reasoning text. usage on a chunk
    # after the finish chunk.
    'openrouter-reasoning-keepalives.sse': {
        'text_len': 446,
        'text_sha256': '863c7d8a882d2101876c75dfd26b35334e37bf1d00d9bb6c7f8551d86ffb83ca',
        'text_head': 'I’m ChatGPT, a large-lan',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [9, 104, 113],
        'error': None,
    },
    # ':' comments; finish 'stop' sent twice (second one with usage). No annotations
    # actually present in the deltas.
    'openrouter-web-search.sse': {
        'text_len': 40,
        'text_sha256': '574034ab5888a83271fc0c1fd0689944e7935c944ecec31b1db43c59c993f228',
        'text_head': 'https://github.com/pydan',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [8174, 30, 8204],
        'error': None,
    },
    # Extra 'citations' fields ignored; usage on every chunk, keep the last (10/336/346).
    # Final chunk has object 'chat.completion.done' but is an ordinary chunk with finish
    # stop. No [DONE].
    'perplexity-citations.sse': {
        'text_len': 34,
        'text_sha256': '602a838182e6366fe674b2d7e5ec495f64697b8fb6fcc07ae5c60000babd0252',
        'text_head': 'The current population o',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [10, 336, 346],
        'error': None,
    },
    # '<think>...</think>' is inline in content: SPEC section 6 has no rule to split it,
    # so it stays TEXT and reasoning is empty (judgement call). Per-choice 'text' field
    # duplicates delta.content and is ignored. usage non-null only on the finish chunk.
    'together-r1-think-inline.sse': {
        'text_len': 4002,
        'text_sha256': 'da61772146104c5e525d76c117487c6abed4640c26cc0925977da2eb5dcac156',
        'text_head': '<think>\nOkay, the user a',
        'reasoning_len': 0,
        'reasoning_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'reasoning_head': '',
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [10, 955, 965],
        'error': None,
    },
    # reasoning_content deltas, then the whole call in one delta. usage on the final
    # empty-choices chunk; total_tokens 560 is as sent (includes reasoning tokens, !=
    # prompt+completion). No [DONE].
    'xai-reasoning-tool.sse': {
        'text_len': 0,
        'text_sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'text_head': '',
        'reasoning_len': 1069,
        'reasoning_sha256': '7df9a5068fc57ed4c3b8a1639dc6b569a75dfcf8859c7fd2320f84e9a4d6bc6f',
        'reasoning_head': 'First, the user is askin',
        'tool_calls': [['call_79382389', 'weather', '{"location":"San Francisco"}']],
        'finish_reason': 'tool_calls',
        'usage': [307, 26, 560],
        'error': None,
    },
    # reasoning_content then content. role on every delta. usage on the finish chunk.
    # [DONE].
    'zai-glm-thinking.sse': {
        'text_len': 1,
        'text_sha256': '4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a',
        'text_head': '4',
        'reasoning_len': 2173,
        'reasoning_sha256': '960317a214d06504c4bf8035707c11efe171d2d0137223fecc06993b7816892d',
        'reasoning_head': "\n1.  **Analyze the User'",
        'tool_calls': [],
        'finish_reason': 'stop',
        'usage': [13, 564, 577],
        'error': None,
    },
}
