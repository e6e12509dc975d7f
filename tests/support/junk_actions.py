"""Junk actions: what a broken model, a fuzzer or a careless user sends to ``env.step``.

Every one is a ``str`` (non-strings are a TypeError, tested apart). ``JUNK`` holds at least 100
kinds: empty and blank text, control characters, lone surrogates, huge strings, deep nesting,
malformed and hostile tool calls, wrong argument types, format-string, HTML and SQL payloads,
and every family's commands sent to the other families.
"""

from __future__ import annotations

import json


def _tool(name, arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def _tagged(payload: str) -> str:
    return f"<tool_call>{payload}</tool_call>"


def _nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


JUNK: dict[str, str] = {
    # --- empty, blank, control characters, encodings
    "empty": "",
    "space": " ",
    "newlines": "\n\n\n",
    "tabs": "\t\t",
    "nul": "\x00",
    "nul-inside": "look\x00around",
    "bell-escape": "\x07\x1b[31mred\x1b[0m",
    "crlf": "look\r\n",
    "form-feed": "\x0c\x0b",
    "zero-width": "\u200b\u200c\u200d\ufeff",
    "rtl-override": "\u202eexamine\u202c",
    "lone-surrogate": "\ud800",
    "lone-surrogate-low": "\udfff",
    "surrogate-in-text": "search[\ud800 shoes]",
    "emoji": "🙂🚀💥" * 10,
    "combining": "e\u0301\u0301\u0301\u0301",
    "cjk": "中文命令",
    "replacement-char": "\ufffd\ufffd",
    "private-use": "\ue000\uf8ff",
    "max-codepoint": "\U0010ffff",
    "latin1-mojibake": "Ã©Ã¨Ã ",
    # --- size
    "100kb": "a" * 100_000,
    "100kb-words": "look " * 20_000,
    "long-line-no-spaces": "x" * 20_000,
    "many-lines": "look\n" * 5_000,
    "1mb": "b" * 1_000_000,
    # --- the browser crashes, sent everywhere
    "click-dict-list-key": "click({[]: 1})",
    "click-surrogate": "click('\ud800')",
    "click-3000-dashes": "click(" + "-" * 3000 + "1)",
    "click-100000-dashes": "click(" + "-" * 100_000 + "1)",
    "deep-tool-args": '{"name": "click", "arguments": {"bid": ' + _nested(1000) + "}}",
    "deep-json-list": _nested(1000),
    "deep-json-object": '{"a":' * 1000 + "1" + "}" * 1000,
    "deep-parens": "(" * 1000 + ")" * 1000,
    "deep-call": "click(" * 500 + ")" * 500,
    "send-msg-surrogate": "send_msg('\ud800')",
    # --- malformed tool calls
    "tool-not-json": "<tool_call>{not json}</tool_call>",
    "tool-unclosed": '<tool_call>{"name": "look"',
    "tool-empty": "<tool_call></tool_call>",
    "tool-no-name": _tagged(json.dumps({"arguments": {}})),
    "tool-name-null": _tagged(json.dumps({"name": None, "arguments": {}})),
    "tool-name-number": _tagged(json.dumps({"name": 42, "arguments": {}})),
    "tool-name-list": _tagged(json.dumps({"name": ["look"], "arguments": {}})),
    "tool-unknown": _tagged(_tool("format_disk", {"drive": "C:"})),
    "tool-args-string": _tagged(json.dumps({"name": "search", "arguments": "not an object"})),
    "tool-args-list": _tagged(json.dumps({"name": "search", "arguments": [1, 2]})),
    "tool-args-null": _tagged(json.dumps({"name": "search", "arguments": None})),
    "tool-args-bad-json-string": _tagged(json.dumps({"name": "search", "arguments": "{oops"})),
    "tool-args-extra": _tagged(_tool("calculator", {"expression": "1", "unexpected": True})),
    "tool-args-missing": _tagged(_tool("calculator", {})),
    "tool-list-empty": _tagged("[]"),
    "tool-list-many": _tagged(json.dumps([{"name": "look", "arguments": {}}] * 50)),
    "tool-bare-json": _tool("look", {}),
    "tool-openai-shape-bad": json.dumps({"tool_calls": [{"function": {"name": 1, "arguments": 2}}]}),
    "tool-openai-empty": json.dumps({"tool_calls": []}),
    "tool-nested-tags": "<tool_call><tool_call>{}</tool_call></tool_call>",
    "tool-huge-args": _tagged(_tool("search", {"query": "q" * 200_000})),
    "react-no-input": "Action: search\nAction Input:",
    "react-bad-input": "Action: calculator\nAction Input: {{{",
    "function-call-xml": '<function=search>{"query": 1}</function>',
    # --- wrong argument types
    "args-number-for-string": _tagged(_tool("search", {"query": 12345})),
    "args-bool": _tagged(_tool("calculator", {"expression": True})),
    "args-null": _tagged(_tool("calculator", {"expression": None})),
    "args-object": _tagged(_tool("calculator", {"expression": {"a": 1}})),
    "args-float-inf": '<tool_call>{"name": "calculator", "arguments": {"expression": Infinity}}</tool_call>',
    "args-nan": '<tool_call>{"name": "calculator", "arguments": {"expression": NaN}}</tool_call>',
    "args-huge-int": _tagged('{"name": "scroll", "arguments": {"dx": ' + "9" * 5000 + ', "dy": 0}}'),
    "click-number": "click(12)",
    "click-negative": "click(-1)",
    "click-float": "click(1.5)",
    "click-none": "click(None)",
    "click-list": "click(['1'])",
    "fill-too-many": "fill('1', 'a', 'b', 'c')",
    "fill-kwargs": "fill(**{'bid': '1'})",
    "scroll-strings": "scroll('a', 'b')",
    "goto-javascript": "goto('javascript:alert(1)')",
    "goto-file": "goto('file:///etc/passwd')",
    "goto-other-origin": "goto('http://example.com/')",
    # --- format strings, templates, injection payloads
    "format-braces": "{0}{1}{__class__}",
    "format-percent": "%s%s%s%n%x",
    "format-dunder": "{action.__class__.__mro__}",
    "jinja": "{{ 7*7 }}{% raw %}",
    "html-script": "<script>alert(1)</script>",
    "html-img": '<img src=x onerror="alert(1)">',
    "html-entities": "&lt;&gt;&amp;&#0;&#xD800;",
    "html-comment": "<!-- look -->",
    "sql": "'; DROP TABLE products; --",
    "sql-fts": 'search["AND OR NOT NEAR( * ^]',
    "fts-quotes": 'search["""]',
    "shell": "$(rm -rf /); `reboot`",
    "path-traversal": "../../../../etc/passwd",
    "python-eval": "__import__('os').system('echo pwned')",
    "python-lambda": "(lambda: 1)()",
    "regex-bomb": "(" + "a*" * 50 + ")*b",
    "markdown-fence": "```\n```python\nclick('1')",
    "unclosed-fence": "```python\nclick('1')",
    "think-tags": "<think>" * 100,
    "action-tags-empty": "<action></action>",
    "action-tags-nested": "<action><action>look</action></action>",
    # --- other families' commands (valid somewhere, usually not here)
    "household-go": "go to fridge 1",
    "household-take": "take apple 1 from countertop 1",
    "household-put-legacy": "put mug 1 in/on cabinet 1",
    "household-nonsense-object": "take unicorn 99 from fridge 1",
    "shop-search": "search[red shoes]",
    "shop-click": "click[buy now]",
    "shop-click-empty": "click[]",
    "shop-search-empty": "search[]",
    "browser-click": "click('12')",
    "browser-fill": "fill('3', 'hello')",
    "browser-noop": "noop()",
    "negotiation-offer": "offer[lamp, rug for 85]",
    "negotiation-accept": "accept",
    "negotiation-say": "say[hello]",
    "negotiation-offer-bad": "offer[for -1]",
    "auction-bid": "bid[5]",
    "auction-bid-negative": "bid[-5]",
    "auction-bid-huge": "bid[99999999999999999999]",
    "auction-bid-float": "bid[1.5]",
    "code-run": "run()",
    "code-submit": "submit()",
    "code-write": 'write_file("/etc/passwd", "x")',
    "toolqa-answer-plain": "answer(42)",
    "calculator-div-zero": _tagged(_tool("calculator", {"expression": "1/0"})),
    "calculator-pow": _tagged(_tool("calculator", {"expression": "9**9**9**9"})),
    "calculator-deep": _tagged(_tool("calculator", {"expression": "(" * 500 + "1" + ")" * 500})),
    "python-tool-wrong-type": _tagged(_tool("python", {"code": 12})),
    "counter-verb": "inc",
    "quit": ":q",
}

assert len(JUNK) >= 100, len(JUNK)

#: a few strings the battery sends to the slow (browser) envs: the issue's crashes and a sample
BROWSER_SAMPLE = [
    "empty",
    "nul",
    "lone-surrogate",
    "100kb",
    "click-dict-list-key",
    "click-surrogate",
    "click-3000-dashes",
    "click-100000-dashes",
    "deep-tool-args",
    "deep-json-list",
    "send-msg-surrogate",
    "tool-not-json",
    "tool-name-number",
    "tool-args-string",
    "tool-huge-args",
    "args-huge-int",
    "click-none",
    "click-list",
    "fill-kwargs",
    "scroll-strings",
    "goto-javascript",
    "goto-file",
    "format-braces",
    "html-script",
    "python-eval",
    "household-go",
    "shop-search",
    "auction-bid",
]

#: non-string actions: each must raise TypeError naming the expected type
NON_STRINGS = [None, b"look", ["look"], ("look",), {"action": "look"}, 42, 4.2, True, object()]
