"""A session's title: Claude Code's order (custom title, AI title, summary, first prompt), last line of a type wins."""

from __future__ import annotations

from ctxpipe.core.titles import session_title


def user(content: object, **extra: object) -> dict[str, object]:
    return {"type": "user", "message": {"role": "user", "content": content}, **extra}


def test_a_custom_title_beats_the_ai_title_the_summary_and_the_prompt() -> None:
    records = [
        {"type": "summary", "summary": "Old summary", "leafUuid": "x"},
        user("fix the parser"),
        {"type": "ai-title", "aiTitle": "Parser fix"},
        {"type": "custom-title", "customTitle": "parser"},
    ]
    assert session_title(records) == "parser"
    assert session_title(records[:3]) == "Parser fix"
    assert session_title(records[:2]) == "Old summary"
    assert session_title(records[1:2]) == "fix the parser"


def test_the_last_line_of_a_type_wins_and_blank_titles_do_not_count() -> None:
    records = [{"type": "ai-title", "aiTitle": "first"}, {"type": "ai-title", "aiTitle": "second"}, {"type": "custom-title", "customTitle": "  "}]
    assert session_title(records) == "second"


def test_the_first_prompt_skips_what_the_harness_wrote() -> None:
    records = [
        user("<command-name>/clear</command-name>"),
        user("hidden", isMeta=True),
        user([{"type": "tool_result", "tool_use_id": "t", "content": "out"}]),
        user([{"type": "text", "text": "  rename   the\nmodule "}]),
        user("later prompt"),
    ]
    assert session_title(records) == "rename the module"


def test_no_title_at_all_is_none() -> None:
    assert session_title([{"type": "assistant", "message": {"content": []}}, {"type": "summary", "summary": 3}]) is None


def test_what_an_ide_put_before_the_prompt_is_not_the_title() -> None:
    selection = "<ide_selection>The user selected lines 1-9 of a.py:\nimport os\n</ide_selection>"
    opened = "<ide_opened_file>The user opened b.py in the IDE.</ide_opened_file>"
    assert session_title([user(selection + " explain this"), user("later")]) == "explain this"
    # A prompt that is only the IDE's context is no prompt: the next one is the title.
    assert session_title([user([{"type": "text", "text": opened}]), user("fix b")]) == "fix b"


def test_a_bom_before_the_first_line_does_not_hide_its_prompt() -> None:
    import orjson
    from ctxpipe.core.titles import buffer_title

    lines = [user("first question"), user("second question")]
    whole = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    assert buffer_title(b"\xef\xbb\xbf" + whole) == buffer_title(whole) == "first question"
