"""A ChatML chat template that renders tools (Hermes style), for tokenizers whose own template
ignores ``tools=`` (SmolLM2-135M-Instruct's does).

Tools go into the system turn as JSON inside ``<tools></tools>``; assistant tool calls render as
``<tool_call>{...}</tool_call>`` (what ``parsers.parse_hermes`` reads back); tool results render
as a ``tool`` turn wrapped in ``<tool_response>``.
"""

from __future__ import annotations

from typing import Any

TOOLS_CHAT_TEMPLATE = """\
{%- set first_is_system = messages and messages[0]['role'] == 'system' -%}
{{- '<|im_start|>system\\n' -}}
{%- if first_is_system -%}{{- messages[0]['content'] -}}{%- else -%}You are a helpful assistant.{%- endif -%}
{%- if tools -%}
{{- '\\n\\nYou can call these tools. Their signatures, as JSON schema:\\n<tools>\\n' -}}
{%- for t in tools -%}{{- (t if t['function'] is defined else {'type': 'function', 'function': t}) | tojson -}}\
{{- '\\n' -}}{%- endfor -%}
{{- '</tools>\\nTo call a tool, answer with one <tool_call></tool_call> block per call, holding \
{"name": <tool name>, "arguments": <JSON object>}.' -}}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- for m in messages -%}
{%- if loop.first and first_is_system -%}
{%- elif m['role'] == 'assistant' -%}
{{- '<|im_start|>assistant\\n' + (m['content'] or '') -}}
{%- for c in (m['tool_calls'] or []) -%}
{%- set f = c['function'] if c['function'] is defined else c -%}
{%- if m['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}
{{- '<tool_call>{"name": ' + (f['name'] | tojson) + ', "arguments": ' -}}
{%- if f['arguments'] is string -%}{{- f['arguments'] -}}{%- else -%}{{- f['arguments'] | tojson -}}{%- endif -%}
{{- '}</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\\n' -}}
{%- elif m['role'] == 'tool' -%}
{{- '<|im_start|>tool\\n<tool_response>\\n' + m['content'] + '\\n</tool_response><|im_end|>\\n' -}}
{%- else -%}
{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"""


def with_tools_template(tokenizer: Any) -> Any:
    """Give ``tokenizer`` the tools-aware template unless its own already uses ``tools``."""
    if "tools" not in (tokenizer.chat_template or ""):
        tokenizer.chat_template = TOOLS_CHAT_TEMPLATE
    return tokenizer
