"""The x-ray's costs in Chromium: each TPU line's share is what cost/estimate.py computes for it, the table sorts the
instructions by cost and leads to their lines, the top instruction's bound is said with cost/estimate.py's figures,
the CPU says why it has no time, and a layer without costs is a one-line note."""
import dataclasses

import pytest
from conftest import close_pages
from test_xray_in_browser import in_view, lit, open_xray, phone, visible_columns

from dumpgym.cost import estimate as cost
from dumpgym.cost.view import cost_file
from dumpgym.record.schema import Corpus

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def records(gym_data):
    return {p.slug: p for p in Corpus.from_json(gym_data[0]).programs}


def share_text(share):
    """A share as the page's gutter writes it (xray-cost.js `shareText`)."""
    if not share:
        return ""
    if share < 0.001:
        return "<0.1%"
    return f"{share * 100:.1f}%" if share < 0.1 else f"{round(share * 100)}%"


def timed(costs):
    """cost/estimate.py's rows outside fusions that take time, with their shares."""
    return {c.line: costs.share(c) for c in costs.instructions
            if c.place in ("entry", "control") and costs.share(c)}


def gutter(page):
    return dict(page.eval_on_selector_all("[data-xray-col=hlo] [data-share]",
                                          "els => els.map(e => [Number(e.dataset.line), e.dataset.share])"))


def test_each_tpu_line_shows_the_share_cost_py_computes_for_it(page, records):
    open_xray(page, "scan-layers", "tpu")  # a scan: its loop body's lines count their trips
    costs = cost.layer_cost(records["scan-layers"].compiled["tpu"], "tpu")
    shares = timed(costs)
    assert gutter(page) == {line: share_text(s) for line, s in shares.items()}
    top = max(shares, key=lambda line: (shares[line], -line))
    shown = page.eval_on_selector(f"[data-xray-col=hlo] [data-line='{top}']",
                                  "e => getComputedStyle(e, '::after').content")
    assert shown == f'"{share_text(shares[top])}"'


def test_sorting_by_cost_orders_the_table_by_share_and_a_row_leads_to_its_line(page, records, fetch_json):
    open_xray(page, "mlp", "tpu")
    costs = cost.layer_cost(records["mlp"].compiled["tpu"], "tpu")
    rows = lambda: page.eval_on_selector_all("[data-cost-rows] tr", "els => els.map(e => Number(e.dataset.costLine))")  # noqa: E731
    in_line_order = rows()
    assert in_line_order == sorted(in_line_order)
    page.click("[data-cost-sort=time]")
    assert page.get_attribute("[data-cost-sort=time]", "aria-pressed") == "true"
    by_line = {c.line: c for c in costs.instructions}
    assert rows() == sorted(in_line_order, key=lambda n: (-(costs.share(by_line[n]) or 0), n))
    first = rows()[0]
    page.click(f"[data-cost-rows] tr[data-cost-line='{first}'] td:nth-child(3)")
    line = page.locator(f"[data-xray-col=hlo] [data-line='{first}']")
    assert "cur" in line.get_attribute("class") and in_view(page, "hlo", first)
    eqns = next(i for i in fetch_json("data/programs/mlp.json")["compiled"]["tpu"]["instructions"] if i["line"] == first)["eqns"]
    assert eqns and first in lit(page, "hlo") and lit(page, "jaxpr"), "its equations light as a hover lights them"
    assert page.get_attribute("#xray", "data-pinned") is not None
    assert share_text(costs.share(by_line[first])) in page.locator("[data-xray-status]").inner_text()


def test_the_table_is_played_from_the_keyboard(page):
    open_xray(page, "mlp", "tpu")
    button = page.locator("[data-cost-rows] button").last
    button.focus()
    n = int(button.get_attribute("data-cost-line"))
    assert in_view(page, "hlo", n)
    page.keyboard.press("Enter")
    assert "cur" in page.locator(f"[data-xray-col=hlo] [data-line='{n}']").get_attribute("class")
    page.locator("[data-cost-sort=time]").focus()
    page.keyboard.press("Enter")
    assert page.get_attribute("[data-cost-sort=time]", "aria-pressed") == "true"


def test_the_top_instructions_bound_is_said_with_the_figures_cost_py_computes(page, records):
    open_xray(page, "mlp", "tpu")
    costs = cost.layer_cost(records["mlp"].compiled["tpu"], "tpu")
    shares = timed(costs)
    top = next(c for c in costs.instructions if c.line == max(shares, key=lambda line: (shares[line], -line)))
    seconds, bound = top.work.roofline(costs.chip)
    sentence = page.locator("[data-xray-bound]").inner_text()
    assert f"%{top.name}" in sentence and f"HLO {top.line}" in sentence and f"{bound}-bound" in sentence
    facts = dict(page.eval_on_selector_all("[data-xray-bound] data", "els => els.map(e => [e.dataset.costFact, Number(e.value)])"))
    per_byte = (top.work.flops + top.work.transcendentals) / top.work.hbm_bytes
    assert facts == pytest.approx({"share": shares[top.line], "flops": top.work.flops, "hbm_bytes": top.work.hbm_bytes,
                                   "transcendentals": top.work.transcendentals, "per_byte": per_byte,
                                   "ridge": costs.chip.ridge}, rel=1e-12)
    assert ("below" if per_byte < costs.chip.ridge else "above") in sentence and costs.chip.name in sentence
    assert (per_byte < costs.chip.ridge) == (bound == "memory")
    head = page.locator("[data-xray-cost-head] data").get_attribute("value")
    summed = sum(c.work.roofline(costs.chip)[0] * (c.runs or 1) for c in costs.instructions if c.line in shares)
    assert float(head) == pytest.approx(summed, rel=1e-12)


def test_the_cpu_layer_shows_its_figures_and_says_why_it_has_no_time(page, records):
    open_xray(page, "mlp", "cpu")
    assert gutter(page) == {}
    note = page.locator("[data-xray-cost-note]").inner_text()
    assert "No time and no shares for the CPU" in note and "peaks depend on the machine" in note
    assert page.locator("[data-cost-sort=time]").count() == 0 and page.locator("[data-xray-bound]").count() == 0
    costs = cost.layer_cost(records["mlp"].compiled["cpu"], "cpu")
    most = max((c for c in costs.instructions if c.place == "entry"), key=lambda c: (c.work.hbm_bytes, -c.line))
    page.click("[data-cost-sort=bytes]")
    assert page.get_attribute("[data-cost-rows] tr", "data-cost-line") == str(most.line)


def test_a_layer_without_the_cost_facts_is_a_one_line_note_and_the_listing_still_shows(page, records):
    old = dataclasses.replace(records["rmsnorm"].compiled["tpu"], computations=())
    made = cost_file(old, "tpu")
    page.route("**/data/cost/tpu/rmsnorm.json", lambda route: route.fulfill(json=made))
    open_xray(page, "rmsnorm", "tpu")
    note = page.locator("[data-xray-cost-note]").inner_text()
    assert note == f"No costs for this layer: {made['error']}"
    assert gutter(page) == {} and page.locator("[data-cost-rows]").count() == 0
    assert page.locator("[data-xray-col=hlo] [data-line]").count() > 0 and page.locator("[data-xray-hlo-note]").count() == 1


def test_a_device_kind_without_peaks_says_which_and_shows_its_figures(page, records):
    dumped = dataclasses.replace(records["mlp"].compiled["tpu"], device_kind="TPU (v5 lite)")
    made = cost_file(dumped, "tpu")
    page.route("**/data/cost/tpu/mlp.json", lambda route: route.fulfill(json=made))
    open_xray(page, "mlp", "tpu")
    note = page.locator("[data-xray-cost-note]").inner_text()
    assert note.startswith("No time and no shares: the gym's cost model has no published peaks for the device kind \"TPU (v5 lite)\"")
    assert gutter(page) == {} and page.locator("[data-cost-sort=time]").count() == 0
    assert page.eval_on_selector_all("[data-cost-rows] tr", "els => els.length") == len(made["rows"])


def test_on_a_phone_a_tapped_row_shows_the_compiled_column_at_its_line(open_fresh, base_url):
    context, pg, errors = phone(open_fresh, base_url)
    open_xray(pg, "mlp", "tpu")
    assert visible_columns(pg) == ["jaxpr"]
    row = pg.locator("[data-cost-rows] tr").first
    n = int(row.get_attribute("data-cost-line"))
    row.locator("button").tap()
    assert visible_columns(pg) == ["hlo"] and pg.get_attribute("#xray-tab-hlo", "aria-selected") == "true"
    assert in_view(pg, "hlo", n) and "cur" in pg.locator(f"[data-xray-col=hlo] [data-line='{n}']").get_attribute("class")
    assert errors == []
    close_pages(context)


def test_collectives_show_their_bytes_sent_and_share_and_an_interconnect_bound_is_said(page, records):
    """fsdp-step on the TPU: a column of bytes sent, each row's cost/estimate.py's, its collectives timed (a share, not 0%);
    the head names the interconnect's published figure and why XLA's optimal_seconds differs."""
    open_xray(page, "fsdp-step", "tpu")
    costs = cost.layer_cost(records["fsdp-step"].compiled["tpu"], "tpu")
    sent = {c.line: c.work.sends for c in costs.instructions if c.place in ("entry", "control") and c.work.sends}
    assert sum(sent.values()) == costs.total.sends and sent
    assert page.locator("th", has_text="sent").count() == 1
    shares = timed(costs)
    assert all(line in shares for line in sent), "every collective takes time on the interconnect"
    assert {line: share_text(shares[line]) for line in sent} == {line: gutter(page)[line] for line in sent}
    head = page.locator("[data-xray-cost-head]").inner_text()
    assert "sent on its interconnect" in head and "optimal_seconds" in page.locator("[data-xray-cost-gap]").inner_text()
    top = next(c for c in costs.instructions if c.line == max(shares, key=lambda line: (shares[line], -line)))
    if top.work.roofline(costs.chip)[1] == "interconnect":
        sentence = page.locator("[data-xray-bound]").inner_text()
        assert "interconnect-bound" in sentence and f"%{top.name}" in sentence
        facts = dict(page.eval_on_selector_all("[data-xray-bound] data", "els => els.map(e => [e.dataset.costFact, Number(e.value)])"))
        assert facts["sends"] == top.work.sends


def test_a_kernel_of_unknown_cost_reads_unknown_never_zero(page, records):
    open_xray(page, "pallas-matmul", "tpu")
    costs = cost.layer_cost(records["pallas-matmul"].compiled["tpu"], "tpu")
    (kernel,) = [c for c in costs.instructions if c.work.unknown]
    row = page.locator(f"[data-cost-rows] tr[data-cost-line='{kernel.line}']")
    assert row.locator("[data-cost-unknown]").inner_text() == "unknown"
    assert row.locator("[data-cost-share]").inner_text() == "unknown"
    head = page.locator("[data-xray-cost-head]").inner_text()
    assert head.startswith("Estimated time at least ") and "1 kernel of unknown cost" in head


def test_an_h100_rows_f32_dots_are_set_against_their_own_ridge_point(page, records):
    """sharded on the GPU: its top instruction is an f32 dot, timed at the TF32 rate; the sentence sets it against
    the ridge point of that rate (TF32 over the HBM bandwidth, as the datasheet's figures give it), not the bf16 one."""
    open_xray(page, "sharded", "gpu")
    costs = cost.layer_cost(records["sharded"].compiled["gpu"], "gpu")
    shares = timed(costs)
    top = next(c for c in costs.instructions if c.line == max(shares, key=lambda line: (shares[line], -line)))
    assert top.work.f32_matmul and top.work.f32_matmul == top.work.matmul
    sentence = page.locator("[data-xray-bound]").inner_text()
    facts = dict(page.eval_on_selector_all("[data-xray-bound] data",
                                           "els => els.map(e => [e.dataset.costFact, Number(e.value)])"))
    work = top.work
    computed = work.flops + work.transcendentals
    ridge = computed / ((computed - work.f32_matmul) / 989e12 + work.f32_matmul / 494.7e12) / 3.35e12
    assert facts["ridge"] == pytest.approx(ridge, rel=1e-12) and ridge < costs.chip.ridge
    assert "TF32" in sentence and f"%{top.name}" in sentence
