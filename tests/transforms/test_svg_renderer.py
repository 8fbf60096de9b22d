"""Charts render through the helper process as they would in-process; a helper that dies leaves rendering in-process."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import vl_convert

from transforms import charts, svg_renderer

ROWS = [{"name": "ampere_sgemm_128x64_nn", "value_ns": 3_500_000}, {"name": "ncclKernel_AllReduce", "value_ns": 1_200}]


def _helpers() -> list[int]:
    """This process's children running the helper module."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            ppid = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("PPid:"))
            command = (status.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, StopIteration):  # exited while listed
            continue
        if ppid == os.getpid() and os.path.abspath(svg_renderer.__file__).encode() in command:
            found.append(int(status.parent.name))
    return found


def _render(spec: dict[str, object]) -> str:
    return svg_renderer.PendingSvg(spec).result()


@pytest.fixture
def helper() -> Iterator[int]:
    """A helper started for the test, its pid; stopped after."""
    already = set(_helpers())
    svg_renderer.start_helper()
    (pid,) = set(_helpers()) - already or set(_helpers())
    yield pid
    if svg_renderer._helper is not None:
        svg_renderer._helper.close()
        svg_renderer._helper = None


def test_the_helper_renders_what_vl_convert_renders_in_process(helper: int) -> None:
    spec = charts.ranked_time_bars(ROWS, value_title="GPU time")
    assert _render(spec) == vl_convert.vegalite_to_svg(spec)
    assert helper in _helpers()  # it stays for the next chart
    svg = charts.to_svg(charts.ranked_time_bars(ROWS, value_title="GPU time"))
    assert "<title>#1 ampere_sgemm_128x64_nn: 3.5 ms</title>" in svg


def test_a_spec_vl_convert_refuses_raises_its_error(helper: int) -> None:
    with pytest.raises(ValueError, match="Invalid field type"):
        _render({"mark": "bar", "encoding": {"x": {"field": "a", "type": "nonsense"}}})
    assert helper in _helpers()  # a bad spec does not cost the helper


def test_charts_render_in_process_once_the_helper_is_gone(helper: int, caplog: pytest.LogCaptureFixture) -> None:
    os.kill(helper, signal.SIGKILL)
    spec = charts.ranked_time_bars(ROWS, value_title="GPU time")
    with caplog.at_level(logging.WARNING, logger=svg_renderer.__name__):
        assert _render(spec) == vl_convert.vegalite_to_svg(spec)
        assert _render(spec) == vl_convert.vegalite_to_svg(spec)
    assert [r.getMessage() for r in caplog.records] == [
        "the chart helper exited (code -9); rendering charts in this process"
    ]  # said once, then in-process without asking it again


def test_the_helper_exits_when_its_parent_closes_the_pipe(helper: int) -> None:
    assert svg_renderer._helper is not None
    svg_renderer._helper.close()
    assert helper not in _helpers()


def test_specs_sent_at_once_get_their_own_replies_in_order(helper: int) -> None:
    # A spec larger than a pipe's 64 KiB, sent while the helper renders the one before, and a refused one between.
    big = charts.ranked_time_bars(ROWS, value_title="GPU time")
    for row in big["data"]["values"]:
        row["unused"] = "x" * 60_000
    refused = {"mark": "bar", "encoding": {"x": {"field": "a", "type": "nonsense"}}}
    small = charts.ranked_time_bars(ROWS, value_title="GPU time")
    assert len(str(big)) > 100_000
    pending = [svg_renderer.PendingSvg(spec) for spec in (small, big, refused, small)]
    assert pending[0].result() == pending[3].result() == vl_convert.vegalite_to_svg(small)
    assert pending[1].result() == vl_convert.vegalite_to_svg(big)
    with pytest.raises(ValueError, match="Invalid field type"):
        pending[2].result()


def test_a_forked_child_leaves_the_parents_helper_alone(helper: int) -> None:
    spec = charts.ranked_time_bars(ROWS, value_title="GPU time")
    child = os.fork()
    if child == 0:  # the child would render in-process (not here: V8 does not survive a fork of its threads)
        os._exit(0 if svg_renderer._helper is None else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _render(spec) == vl_convert.vegalite_to_svg(spec)  # the parent's helper still answers in order
    assert helper in _helpers()


def test_what_the_helper_prints_besides_replies_goes_to_its_stderr() -> None:
    # The helper's own process, driven by hand: a stray print must not land between the replies on its stdout.
    probe = (
        "import runpy, vl_convert; render = vl_convert.vegalite_to_svg; "
        "vl_convert.vegalite_to_svg = lambda spec: (print('stray'), render(spec))[1]; "
        f"runpy.run_module('{svg_renderer.__name__}', run_name='__main__')"
    )
    spec = charts.ranked_time_bars(ROWS, value_title="GPU time")
    done = subprocess.run([sys.executable, "-c", probe], input=json.dumps(spec) + "\n", capture_output=True,
                          text=True, timeout=120, check=True)
    (reply,) = done.stdout.splitlines()
    assert json.loads(reply)["svg"] == vl_convert.vegalite_to_svg(spec)
    assert done.stderr.split() == ["stray", "stray"]  # the warm-up's and the spec's
