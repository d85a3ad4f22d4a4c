"""The x-ray view in Chromium: hover lights every column, clicks pin, j/k walk, dim lines explain themselves,
and the compiled column shows fusions as units and XLA's own instructions as such."""
import pytest
from conftest import DESKTOP, close_pages

pytestmark = pytest.mark.browser


def open_xray(page, slug, target="cpu"):
    """Show `slug` in the x-ray with its compiled layer for `target` (most tests read the CPU's `hlo`)."""
    page.locator("#xray").scroll_into_view_if_needed()
    page.select_option("[data-xray-pick]", slug)
    page.wait_for_selector(f"#xray[data-ready][data-program='{slug}']")
    has_both = page.get_attribute("[data-xray-targets]", "hidden") is None
    if page.get_attribute("#xray", "data-target") != target and has_both:
        # A click from script: on a narrow screen the compiled column (and its switch) is hidden.
        page.eval_on_selector(f"[data-xray-target={target}]", "b => b.click()")
        page.wait_for_selector(f"#xray[data-ready][data-program='{slug}'][data-target={target}]")


def lit(page, layer):
    return page.eval_on_selector_all(f"[data-xray-col={layer}] .on", "els => els.map(e => Number(e.dataset.line))")


def test_hovering_a_jaxpr_line_lights_its_group_in_both_columns(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    group = next(g for g in program["xray"] if len(g["stablehlo_lines"]) > 1)
    page.hover(f"[data-xray-col=jaxpr] [data-line='{group['jaxpr_lines'][0]}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])
    assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
    status = page.locator("[data-xray-status]").inner_text()
    assert f"equation {group['eqn']}" in status


def visible_columns(page):
    return page.eval_on_selector_all("#xray [data-xray-col]", "els => els.filter(e => e.offsetParent).map(e => e.dataset.xrayCol)")


def in_view(page, layer, line):
    """Whether a line of a column is inside that column's scrolled box, once its scroll has settled (a block
    laid out for the first time as the column scrolls moves the line: scroll.js's `settleScroll`)."""
    return page.evaluate("""async ([layer, line]) => {
        const col = document.querySelector(`[data-xray-col=${layer}]`);
        const seen = () => { const r = col.querySelector(`[data-line="${line}"]`).getBoundingClientRect(),
                                   c = col.getBoundingClientRect();
                             return r.bottom > c.top && r.top < c.bottom; };
        for (let i = 0; i < 10 && !seen(); i++) await new Promise((r) => requestAnimationFrame(r));
        return seen();
    }""", [layer, line])


def group_of(program, eqn):
    return next(g for g in program["xray"] if g["eqn"] == eqn)


def test_the_compiled_column_shows_the_tpu_layer_first_and_names_its_target(page, fetch_json):
    page.locator("#xray").scroll_into_view_if_needed()
    page.select_option("[data-xray-pick]", "mlp")
    page.wait_for_selector("#xray[data-ready][data-program='mlp']")
    tpu = fetch_json("data/programs/mlp.json")["compiled"]["tpu"]
    assert page.get_attribute("#xray", "data-target") == "tpu"
    assert page.locator("[data-xray-target=tpu]").get_attribute("aria-pressed") == "true"
    note = page.locator("[data-xray-hlo-note]").inner_text()
    assert "compiled for TPU v5 lite (v5e, 2×2), without a TPU" in note and tpu["libtpu_version"] in note
    shown = page.eval_on_selector_all("[data-xray-col=hlo] [data-line]", "els => els.map(e => e.textContent)")
    assert "".join(shown).rstrip("\n") == tpu["text"].rstrip("\n")
    page.click("[data-xray-target=cpu]")
    page.wait_for_selector("#xray[data-ready][data-program='mlp'][data-target=cpu]")
    assert "compiled by XLA for cpu" in page.locator("[data-xray-hlo-note]").inner_text()


def test_the_switch_shows_the_gpu_layer_and_a_gpu_line_lights_its_equation(page, fetch_json):
    open_xray(page, "mlp", "gpu")
    program = fetch_json("data/programs/mlp.json")
    gpu = program["compiled"]["gpu"]
    assert page.locator("[data-xray-target=gpu]").get_attribute("aria-pressed") == "true"
    note = page.locator("[data-xray-hlo-note]").inner_text()
    assert f"compiled for {gpu['device_kind']} (1 GPU), without a GPU" in note and "not autotuned" in note
    shown = page.eval_on_selector_all("[data-xray-col=hlo] [data-line]", "els => els.map(e => e.textContent)")
    assert "".join(shown).rstrip("\n") == gpu["text"].rstrip("\n")
    ins = next(i for i in gpu["instructions"] if i["via"] == "tag" and len(i["eqns"]) == 1)
    (eqn,) = ins["eqns"]
    page.hover(f"[data-xray-col=hlo] [data-line='{ins['line']}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group_of(program, eqn)["jaxpr_lines"])
    assert sorted(lit(page, "hlo")) == sorted(gpu["lines_by_eqn"][str(eqn)])


def test_hovering_a_tpu_line_lights_its_equation_in_all_three_columns(page, fetch_json):
    open_xray(page, "mlp", "tpu")
    program = fetch_json("data/programs/mlp.json")
    tpu = program["compiled"]["tpu"]
    conv = next(i for i in tpu["instructions"] if i["opcode"] == "convolution" and i["via"] == "tag")
    (eqn,) = conv["eqns"]
    group = group_of(program, eqn)
    page.hover(f"[data-xray-col=hlo] [data-line='{conv['line']}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])
    assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
    assert sorted(lit(page, "hlo")) == sorted(tpu["lines_by_eqn"][str(eqn)])
    page.hover(f"[data-xray-col=jaxpr] [data-line='{group['jaxpr_lines'][0]}']")
    assert conv["line"] in lit(page, "hlo")


def test_hovering_a_gelu_line_lights_its_equation_in_all_three_columns(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    assert visible_columns(page) == ["jaxpr", "stablehlo", "hlo"]
    tanh = next(e for e in program["eqns"] if e["primitive"] == "tanh")  # the GELU's tanh
    group = group_of(program, tanh["id"])
    compiled = program["compiled"]["cpu"]["lines_by_eqn"][str(tanh["id"])]
    assert len(compiled) >= 2  # its own instruction inside the fusion body, and the fusion's line
    page.hover(f"[data-xray-col=jaxpr] [data-line='{tanh['jaxpr_lines'][0]}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])
    assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
    assert sorted(lit(page, "hlo")) == sorted(compiled)
    assert in_view(page, "hlo", min(compiled))  # the compiled column scrolled to it
    assert f"HLO {', '.join(map(str, sorted(compiled)))}" in page.locator("[data-xray-status]").inner_text()
    band = page.get_attribute(f"[data-xray-col=hlo] [data-line='{min(compiled)}']", "class")
    assert band.split()[1:2] == page.get_attribute(f"[data-xray-col=jaxpr] [data-line='{tanh['jaxpr_lines'][0]}']", "class").split()[1:2]


def test_hovering_a_compiled_line_lights_its_equation_in_the_other_columns(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    dot = next(i for i in program["compiled"]["cpu"]["instructions"] if i["opcode"] == "dot")
    group = group_of(program, dot["eqns"][0])
    page.hover(f"[data-xray-col=hlo] [data-line='{dot['line']}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])
    assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
    assert in_view(page, "stablehlo", min(group["stablehlo_lines"]))


def test_hovering_a_fusion_line_lights_every_equation_it_absorbed(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    fusion = max(program["compiled"]["cpu"]["fusions"], key=lambda f: len(f["eqns"]))
    assert len(fusion["eqns"]) > 3  # the GELU chain, fused into one loop
    groups = [group_of(program, e) for e in fusion["eqns"]]
    page.hover(f"[data-xray-col=hlo] [data-line='{fusion['line']}']")
    assert sorted(lit(page, "jaxpr")) == sorted({n for g in groups for n in g["jaxpr_lines"]})
    assert sorted(lit(page, "stablehlo")) == sorted({n for g in groups for n in g["stablehlo_lines"]})
    hlo_lines = {n for e in fusion["eqns"] for n in program["compiled"]["cpu"]["lines_by_eqn"][str(e)]}
    assert sorted(lit(page, "hlo")) == sorted(hlo_lines)
    # Each absorbed equation keeps its own colour band.
    bands = {page.get_attribute(f"[data-xray-col=jaxpr] [data-line='{g['jaxpr_lines'][0]}']", "class").split()[1]
             for g in groups}
    assert len(bands) > 1
    status = page.locator("[data-xray-status]").inner_text()
    assert f"fusion %{fusion['name']}" in status and f"absorbing {len(fusion['eqns'])} equations" in status
    # The computation the fusion calls is shown as its body, XLA's own converts included.
    called = program["compiled"]["cpu"]["text"].split("\n")[fusion["line"] - 1].split("calls=%")[1].split(",")[0]
    body = [i["line"] for i in program["compiled"]["cpu"]["instructions"] if i["computation"] == called]
    body_shown = page.eval_on_selector_all("[data-xray-col=hlo] .fb", "els => els.map(e => Number(e.dataset.line))")
    assert set(body) <= set(body_shown)


def test_a_line_xla_wrote_on_its_own_is_marked_and_lights_nothing(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    fusion_lines = {f["line"] for f in program["compiled"]["cpu"]["fusions"]}
    own = next(i for i in program["compiled"]["cpu"]["instructions"]
               if not i["eqns"] and i["opcode"] == "convert" and i["line"] not in fusion_lines)
    row = page.locator(f"[data-xray-col=hlo] [data-line='{own['line']}']")
    assert "x" in row.get_attribute("class").split()
    row.hover()
    assert lit(page, "jaxpr") == lit(page, "stablehlo") == lit(page, "hlo") == []
    assert "XLA's own: no equation wrote this" in page.locator("[data-xray-status]").inner_text()
    assert row.get_attribute("title").startswith("XLA's own: no equation wrote this")
    marked = page.eval_on_selector_all("[data-xray-col=hlo] .x", "els => els.length")
    assert marked == sum(1 for i in program["compiled"]["cpu"]["instructions"] if not i["eqns"])


def test_an_instruction_whose_metadata_xla_dropped_lights_its_inferred_equation(page, fetch_json):
    """moe's `%dot.3` has no op_name; the record infers it is the last einsum's dot, and the page says so."""
    open_xray(page, "moe")
    program = fetch_json("data/programs/moe.json")
    dot = next(i for i in program["compiled"]["cpu"]["instructions"] if i["name"] == "dot.3")
    assert dot["via"] == "inferred"
    row = page.locator(f"[data-xray-col=hlo] [data-line='{dot['line']}']")
    assert "x" not in row.get_attribute("class").split()  # not marked as XLA's own
    row.hover()
    group = next(g for g in program["xray"] if g["eqn"] == dot["eqns"][0])
    assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
    src = page.evaluate("() => document.querySelector('script[type=module]').src")
    note = page.evaluate("""async ([src, hlo, line]) => {
        const m = await import(new URL('compiled.js', src).href);
        return m.instructionNote(m.indexCompiled(hlo), line);
    }""", [src, program["compiled"]["cpu"], dot["line"]])
    assert note == f"XLA dropped this instruction's metadata; it computes equation {dot['eqns'][0]} (inferred)"
    assert note in page.inner_text("[data-xray-status]")  # said on the status line while hovered


def test_an_equation_folded_into_another_instruction_says_which_absorbed_it(page, fetch_json):
    """mlp's bias `broadcast_in_dim` has no instruction of its own: XLA's broadcast tagged `add` does its work
    (rule 2). Its jaxpr line lights that instruction and names it; the instruction names both equations."""
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    hlo = program["compiled"]["cpu"]
    ins = next(i for i in hlo["instructions"] if i.get("absorbed") and i["opcode"] != "fusion")
    (folded,) = [a["eqn"] for a in ins["absorbed"]]
    assert not any(folded in i["eqns"] for i in hlo["instructions"] if i["opcode"] != "fusion")
    rule = ins["absorbed"][0]["rule"]
    page.hover(f"[data-xray-col=jaxpr] [data-line='{program['eqns'][folded]['jaxpr_lines'][0]}']")
    assert ins["line"] in lit(page, "hlo")
    status = page.inner_text("[data-xray-status]")
    assert f"equation {folded} has no instruction of its own: folded into %{ins['name']}" in status
    assert f"(rule {rule})" in status
    page.hover(f"[data-xray-col=hlo] [data-line='{ins['line']}']")
    status = page.inner_text("[data-xray-status]")
    assert f"its tag names equation {ins['eqns'][0]}; it also does the work of equation {folded} (rule {rule}" in status


def test_the_backend_and_the_counts_come_from_the_record(page, fetch_json):
    open_xray(page, "mlp")
    hlo = fetch_json("data/programs/mlp.json")["compiled"]["cpu"]
    note = page.locator("[data-xray-hlo-note]").inner_text()
    assert f"compiled by XLA for {hlo['backend']} (jaxlib {hlo['jaxlib_version']})" in note
    assert "a TPU or GPU would fuse differently" in note
    s = hlo["stats"]
    assert page.locator("[data-xray-hlo-stats]").inner_text() == (
        f"{s['fusions']} fusions · {s['attributed']} of {s['instructions']} instructions from equations · "
        f"{s['compiler_own']} XLA's own")
    assert hlo["backend"] in page.locator("[data-xray-backend]").inner_text()


def test_the_fusion_list_names_what_each_fusion_absorbed(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    eqns = {e["id"]: e for e in program["eqns"]}
    buttons = page.locator("[data-xray-compiled] [data-fusion-line]")
    assert buttons.count() == len(program["compiled"]["cpu"]["fusions"])
    for k, fusion in enumerate(program["compiled"]["cpu"]["fusions"]):
        text = buttons.nth(k).inner_text()
        assert f"%{fusion['name']}" in text and fusion["kind"] in text
        for e in fusion["eqns"]:
            assert f"{eqns[e]['primitive']} · jaxpr {eqns[e]['jaxpr_lines'][0]}" in text
        if not fusion["eqns"]:
            assert "XLA's own" in text
    fusion = max(program["compiled"]["cpu"]["fusions"], key=lambda f: len(f["eqns"]))
    page.hover(f"[data-xray-compiled] [data-fusion-line='{fusion['line']}']")
    groups = [group_of(program, e) for e in fusion["eqns"]]
    assert sorted(lit(page, "jaxpr")) == sorted({n for g in groups for n in g["jaxpr_lines"]})
    page.click(f"[data-xray-compiled] [data-fusion-line='{fusion['line']}']")
    assert page.get_attribute("#xray", "data-pinned") == ""


def test_j_and_k_light_the_compiled_column_too(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    page.locator("[data-xray-col=jaxpr]").hover()
    page.keyboard.press("j")
    first = program["xray"][0]
    assert sorted(lit(page, "hlo")) == sorted(program["compiled"]["cpu"]["lines_by_eqn"].get(str(first["eqn"]), []))
    assert lit(page, "hlo")


def phone(open_fresh, base_url, **kw):
    """A 375 x 740 touch screen on the gym (its own localStorage); returns its context, page and uncaught errors."""
    pg = open_fresh(base_url, viewport={"width": 375, "height": 740}, has_touch=True, is_mobile=True, **kw)
    return pg.context, pg, pg.console.uncaught


def test_at_375_pixels_one_layer_shows_and_the_switcher_leads_to_a_tapped_lines_partners(open_fresh, base_url, fetch_json):
    """The compiled column is hidden when the tap lands, its blocks never laid out: switching to it
    must still scroll its first lit line into view, and the tab says how many lines are lit there."""
    context, pg, errors = phone(open_fresh, base_url)
    program = fetch_json("data/programs/mlp.json")
    tanh = next(e for e in program["eqns"] if e["primitive"] == "tanh")
    group = group_of(program, tanh["id"])
    compiled = program["compiled"]["cpu"]["lines_by_eqn"][str(tanh["id"])]
    open_xray(pg, "mlp")
    assert visible_columns(pg) == ["jaxpr"]
    tabs = pg.locator("[data-xray-tabs] [role=tab]")
    assert tabs.all_inner_texts() == ["jaxpr", "StableHLO", "compiled"]
    pg.locator(f"[data-xray-col=jaxpr] [data-line='{tanh['jaxpr_lines'][0]}']").tap()
    assert pg.get_attribute("#xray", "data-pinned") == ""
    assert tabs.all_inner_texts() == [f"jaxpr · {len(group['jaxpr_lines'])}",
                                      f"StableHLO · {len(group['stablehlo_lines'])}", f"compiled · {len(compiled)}"]
    pg.locator("#xray-tab-hlo").tap()
    assert visible_columns(pg) == ["hlo"]
    assert pg.get_attribute("#xray-tab-hlo", "aria-selected") == "true"
    assert sorted(lit(pg, "hlo")) == sorted(compiled)
    assert in_view(pg, "hlo", min(compiled))
    pg.locator("#xray-tab-stablehlo").tap()
    assert visible_columns(pg) == ["stablehlo"] and in_view(pg, "stablehlo", min(group["stablehlo_lines"]))
    pg.locator("#xray-tab-stablehlo").press("ArrowRight")  # the ARIA tab keys move along the layers
    assert visible_columns(pg) == ["hlo"]
    assert pg.evaluate("document.documentElement.scrollWidth") <= 375
    close_pages(context)
    assert errors == []


@pytest.mark.parametrize("width", [375, 1280])
def test_a_touch_screen_is_never_told_about_esc(open_fresh, base_url, fetch_json, width):
    pg = open_fresh(base_url, viewport={"width": width, "height": 740}, has_touch=True, is_mobile=True)
    open_xray(pg, "mlp")
    status = pg.locator("[data-xray-status]")
    assert "Esc" not in status.inner_text() and "tap" in status.inner_text()
    first = fetch_json("data/programs/mlp.json")["xray"][0]
    row = pg.locator(f"[data-xray-col=jaxpr] [data-line='{first['jaxpr_lines'][0]}']")
    row.tap()
    assert pg.get_attribute("#xray", "data-pinned") == ""
    assert "Esc" not in status.inner_text() and "tap again to unpin" in status.inner_text()
    row.tap()
    assert pg.get_attribute("#xray", "data-pinned") is None
    assert "Esc" not in pg.locator("#xray").inner_text()
    close_pages(pg.context)


def test_a_mouse_screen_still_says_esc_unpins(page, fetch_json):
    open_xray(page, "mlp")
    first = fetch_json("data/programs/mlp.json")["xray"][0]
    page.click(f"[data-xray-col=jaxpr] [data-line='{first['jaxpr_lines'][0]}']")
    assert "pinned · Esc unpins" in page.locator("[data-xray-status]").inner_text()


def test_a_big_fusion_is_summed_up_and_expands_on_demand(page, fetch_json):
    """scan's biggest fusion lights over a hundred lines: the status counts them and lists its equations only when asked."""
    open_xray(page, "scan")
    program = fetch_json("data/programs/scan.json")
    fusion = max(program["compiled"]["cpu"]["fusions"], key=lambda f: len(f["eqns"]))
    hlo_lines = {n for e in fusion["eqns"] for n in program["compiled"]["cpu"]["lines_by_eqn"][str(e)]}
    assert len(hlo_lines) > 12
    fusions = len(hlo_lines & {f["line"] for f in program["compiled"]["cpu"]["fusions"]})
    page.click(f"[data-xray-col=hlo] [data-line='{fusion['line']}']")
    status = page.locator("[data-xray-status]")
    summary = status.locator("[data-xray-summary]").inner_text()
    assert summary.startswith(f"lights {len(fusion['eqns'])} equations:")
    assert f"{len(hlo_lines)} HLO lines in {fusions} fusion" in summary
    assert status.locator(".grp").count() == 0
    expand = status.get_by_role("button", name="expand")
    assert expand.get_attribute("aria-expanded") == "false"
    expand.click()
    assert status.locator(".grp").count() == len(fusion["eqns"])
    assert status.get_by_role("button", name="collapse").get_attribute("aria-expanded") == "true"
    status.get_by_role("button", name="collapse").click()
    assert status.locator(".grp").count() == len(fusion["eqns"]) and not status.locator(".grp").first.is_visible()
    # A small group is still listed in full.
    small = next(g for g in program["xray"] if len(g["stablehlo_lines"]) <= 3 and len(g["jaxpr_lines"]) == 1
                 and len(program["compiled"]["cpu"]["lines_by_eqn"].get(str(g["eqn"]), [])) <= 3)
    page.keyboard.press("Escape")
    page.hover(f"[data-xray-col=jaxpr] [data-line='{small['jaxpr_lines'][0]}']")
    assert status.locator("[data-xray-summary]").count() == 0 and status.locator(".grp").count() >= 1


def test_a_dim_line_says_why_in_text_on_keyboard_focus_and_on_tap(page, open_fresh, base_url):
    open_xray(page, "mlp")
    col = page.locator("[data-xray-col=jaxpr]")
    page.locator("[data-xray-pick]").focus()
    page.keyboard.press("Tab")  # onto the jaxpr listing: its top line becomes the keyboard's
    assert page.evaluate("document.activeElement.dataset.xrayCol") == "jaxpr"
    assert "cur" in col.locator("[data-line='1']").get_attribute("class").split()
    why = page.locator("[data-xray-status] [data-xray-why]")
    assert why.is_visible() and why.inner_text() == "structural line: the jaxpr's header and input binders"
    page.keyboard.press("ArrowDown")
    assert "cur" in col.locator("[data-line='2']").get_attribute("class").split()
    page.keyboard.press("Enter")  # jaxpr 2 is an equation: Enter pins it
    assert page.get_attribute("#xray", "data-pinned") == ""
    page.keyboard.press("Escape")
    page.keyboard.press("ArrowUp")
    assert why.inner_text() == "structural line: the jaxpr's header and input binders"
    context, pg, _ = phone(open_fresh, base_url)
    open_xray(pg, "mlp")
    pg.locator("#xray-tab-stablehlo").tap()
    pg.locator("[data-xray-col=stablehlo] [data-line='1']").tap()
    assert pg.locator("[data-xray-status] [data-xray-why]").inner_text().startswith("structural line: the module header")
    close_pages(context)


@pytest.mark.parametrize("width", [375, 1280])
def test_long_lines_wrap_right_of_their_number_and_no_column_scrolls_sideways(open_fresh, base_url, width):
    """A long line wraps into rows that hang right of its number (the row's padding); a short one is one row;
    no column scrolls sideways (every character is on screen)."""
    pg = open_fresh(base_url, **{**DESKTOP, "viewport": {"width": width, "height": 900}})
    open_xray(pg, "scan")
    for layer in ("jaxpr", "stablehlo", "hlo"):
        pg.evaluate(f"document.querySelector('[data-xray-tab={layer}]').click()")
        heights, line_height, wide = pg.evaluate("""(layer) => {
            const col = document.querySelector(`[data-xray-col=${layer}]`);
            const rows = [...col.querySelectorAll('[data-line]')];
            // Blocks off screen are not laid out: lay them all out to measure every line.
            for (const c of col.querySelectorAll('.chunk')) c.style.contentVisibility = 'visible';
            const s = getComputedStyle(rows[0]);
            const lh = parseFloat(s.lineHeight), pad = parseFloat(s.paddingTop) + parseFloat(s.paddingBottom);
            // each row's text starts right of its number: the number's right edge is left of the text box's
            const number = parseFloat(getComputedStyle(rows[0], '::before').width);
            return [rows.map((r) => (r.getBoundingClientRect().height - pad) / lh), number <= parseFloat(s.paddingLeft),
                    col.scrollWidth > col.clientWidth];
        }""", layer)
        assert len(heights) > 50
        assert all(abs(h - round(h)) < 0.05 and round(h) >= 1 for h in heights), layer  # whole rows
        assert max(heights) > 1.5, layer  # scan's long lines wrap
        assert line_height, layer
        assert not wide, layer
    close_pages(pg.context)


def parse_colour(text):
    """'rgb(1, 2, 3)', 'rgba(1, 2, 3, 0.5)' or 'color(srgb 0.1 0.2 0.3 / 0.5)' as (r, g, b, alpha), r, g, b in 0..1."""
    import re
    nums = [float(x) for x in re.findall(r"[\d.]+", text)]
    if text.startswith("color("):
        return (*nums[:3], nums[3] if len(nums) > 3 else 1.0)
    return (nums[0] / 255, nums[1] / 255, nums[2] / 255, nums[3] if len(nums) > 3 else 1.0)


def over(top, bottom):
    """`top` (with its alpha) painted over an opaque `bottom`."""
    a = top[3]
    return tuple(a * t + (1 - a) * b for t, b in zip(top[:3], bottom[:3])) + (1.0,)


def luminance(c):
    lin = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c[:3]]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a, b):
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_contrast_helper_matches_known_ratios():
    assert round(contrast(parse_colour("rgb(0, 0, 0)"), parse_colour("rgb(255, 255, 255)")), 1) == 21.0
    assert round(contrast(parse_colour("rgb(118, 118, 118)"), parse_colour("rgb(255, 255, 255)")), 2) == 4.54
    assert over(parse_colour("rgba(0, 0, 0, 0.5)"), (1, 1, 1, 1))[0] == 0.5


# Each text element of the x-ray: its colour (opacity applied), and the backgrounds under it, innermost first.
COLOURS = """(sel) => [...document.querySelectorAll(sel)].filter((e) => e.getClientRects().length).flatMap((el) => {
    const out = [];
    const paint = (e, pseudo) => {
        const s = getComputedStyle(e, pseudo);
        let alpha = 1;
        for (let a = e; a; a = a.parentElement) alpha *= Number(getComputedStyle(a).opacity);
        if (pseudo) alpha *= Number(s.opacity);
        const bgs = [];
        for (let a = e; a; a = a.parentElement) bgs.push(getComputedStyle(a).backgroundColor);
        out.push({text: (pseudo ? s.content : e.textContent).slice(0, 40), colour: s.color, alpha, bgs,
                  dim: Boolean(e.closest('.u, .x'))});
    };
    for (const e of [el, ...el.querySelectorAll('*')]) if ([...e.childNodes].some((n) => n.nodeType === 3 && n.data.trim())) paint(e, null);
    if (el.matches('[data-line]')) paint(el, '::before');
    return out;
})"""


def worst(samples):
    """The lowest contrast of plain and of dim text among `samples`, each with the text it was measured on."""
    plain, dim = (99.0, ""), (99.0, "")
    for s in samples:
        bg = (1.0, 1.0, 1.0, 1.0)
        for layer in reversed(s["bgs"]):
            bg = over(parse_colour(layer), bg)
        fg = over((*parse_colour(s["colour"])[:3], parse_colour(s["colour"])[3] * s["alpha"]), bg)
        ratio = (contrast(fg, bg), s["text"])
        if s["dim"]:
            dim = min(dim, ratio)
        else:
            plain = min(plain, ratio)
    return plain, dim


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_and_dimmed_lines_keep_their_contrast(open_fresh, base_url, fetch_json, scheme):
    pg = open_fresh(base_url, **DESKTOP)
    pg.emulate_media(color_scheme=scheme)
    open_xray(pg, "mlp")
    program = fetch_json("data/programs/mlp.json")
    where = "#xray [data-line], #xray .xray-status, #xray .stats, #xray .note, #xray h3"
    pg.hover(f"[data-xray-col=jaxpr] [data-line='{program['xray'][0]['jaxpr_lines'][0]}']")  # a group lit, chips shown
    samples = pg.evaluate(COLOURS, where)
    fusion = max(program["compiled"]["cpu"]["fusions"], key=lambda f: len(f["eqns"]))
    pg.click(f"[data-xray-col=hlo] [data-line='{fusion['line']}']")  # lines of many bands lit, a fusion's body tinted
    pg.locator("[data-xray-expand]").click()
    samples += pg.evaluate(COLOURS, where)
    assert sum(s["dim"] for s in samples) > 20 and sum(not s["dim"] for s in samples) > 100
    (plain, plain_text), (dim, dim_text) = worst(samples)
    assert plain >= 4.5, (scheme, plain, plain_text)
    assert dim >= 3.0, (scheme, dim, dim_text)
    close_pages(pg.context)


def test_a_program_without_compiled_hlo_shows_two_columns(page):
    open_xray(page, "evil")
    assert visible_columns(page) == ["jaxpr", "stablehlo"]
    assert page.locator("[data-xray-col=hlo] [data-line]").count() == 0
    assert "No compiled layer" in page.locator("[data-xray-compiled]").inner_text()
    page.hover("[data-xray-col=stablehlo] [data-line='3']")
    open_xray(page, "mlp")
    assert visible_columns(page) == ["jaxpr", "stablehlo", "hlo"]
    assert page.locator("[data-xray-compiled] [data-fusion-line]").count() > 0


def test_hovering_a_stablehlo_line_lights_the_equation_that_emitted_it(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    group = program["xray"][-1]
    page.hover(f"[data-xray-col=stablehlo] [data-line='{group['stablehlo_lines'][-1]}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])


def test_a_line_inside_a_nested_jit_lights_the_inner_equation_not_the_container(page, fetch_json):
    open_xray(page, "layernorm")
    program = fetch_json("data/programs/layernorm.json")
    eqns = {e["id"]: e for e in program["eqns"]}
    inner = next(g for g in program["xray"] if eqns[g["eqn"]]["parent"] is not None)
    page.hover(f"[data-xray-col=jaxpr] [data-line='{inner['jaxpr_lines'][0]}']")
    assert sorted(lit(page, "stablehlo")) == sorted(inner["stablehlo_lines"])


def test_the_stats_line_is_computed_from_the_program(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    stats = program["xray_stats"]
    text = page.locator("[data-xray-stats]").inner_text()
    assert text.startswith(f"{stats['mapped_equations']} mapped equations of {stats['equations']}")
    assert f"{stats['mapped_jaxpr_lines']} of {stats['jaxpr_lines']} jaxpr lines" in text
    assert f"{stats['mapped_stablehlo_op_lines']} of {stats['stablehlo_op_lines']} StableHLO op lines" in text


def test_click_pins_a_group_and_j_k_walk_the_equations(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    first = program["xray"][0]
    page.click(f"[data-xray-col=jaxpr] [data-line='{first['jaxpr_lines'][0]}']")
    assert page.get_attribute("#xray", "data-pinned") == ""
    page.hover("[data-xray-col=stablehlo] [data-line='1']")  # hovering elsewhere keeps the pin
    assert sorted(lit(page, "jaxpr")) == sorted(first["jaxpr_lines"])
    page.keyboard.press("j")
    assert sorted(lit(page, "stablehlo")) == sorted(program["xray"][1]["stablehlo_lines"])
    page.keyboard.press("k")
    assert sorted(lit(page, "stablehlo")) == sorted(first["stablehlo_lines"])
    page.keyboard.press("Escape")
    assert page.get_attribute("#xray", "data-pinned") is None


def test_a_line_lowered_to_nothing_says_so_on_hover(page, fetch_json):
    open_xray(page, "softmax")
    program = fetch_json("data/programs/softmax.json")
    gone = program["lowered_to_nothing"][0]
    eqn = next(e for e in program["eqns"] if e["id"] == gone["eqn"])
    row = page.locator(f"[data-xray-col=jaxpr] [data-line='{eqn['jaxpr_lines'][0]}']")
    assert "u" in row.get_attribute("class").split()
    row.hover()
    assert "lowered to nothing" in page.locator("[data-xray-status]").inner_text()
    assert gone["why"] in row.get_attribute("title")


def test_structural_stablehlo_lines_are_dim_and_say_why(page):
    open_xray(page, "mlp")
    row = page.locator("[data-xray-col=stablehlo] [data-line='1']")
    assert "u" in row.get_attribute("class").split()
    row.hover()
    assert "structural line" in page.locator("[data-xray-status]").inner_text()


def test_a_program_without_groups_shows_dimmed_and_says_so(page):
    open_xray(page, "evil")
    assert page.locator("[data-xray-col=jaxpr] .u").count() == page.locator("[data-xray-col=jaxpr] [data-line]").count()
    assert "no x-ray groups" in page.locator("[data-xray-status]").inner_text()
    assert page.locator("[data-xray-stats]").inner_text().startswith("0 mapped equations of")
    page.hover("[data-xray-col=jaxpr] [data-line='2']")
    assert lit(page, "stablehlo") == []


def test_hovering_every_line_of_the_longest_program_lights_its_own_group(page, fetch_json):
    """Every jaxpr line of the longest program, hovered in turn, lights its own group's StableHLO lines."""
    open_xray(page, "scan")
    program = fetch_json("data/programs/scan.json")
    shown = dict(page.evaluate("""() => {
        const rows = [...document.querySelectorAll('[data-xray-col=jaxpr] [data-line]')];
        return rows.map((r) => {
            r.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
            const on = [...document.querySelectorAll('[data-xray-col=stablehlo] .on')];
            return [r.dataset.line, on.map((e) => Number(e.dataset.line)).sort((a, b) => a - b)];
        });
    }"""))
    expected = {str(line): sorted(g["stablehlo_lines"]) for g in program["xray"] for line in g["jaxpr_lines"]}
    assert len(expected) > 20
    assert {line: shown[line] for line in expected} == expected
    assert {line: lit for line, lit in shown.items() if line not in expected and lit} == {}  # the rest light nothing


def long_program(n: int) -> dict:
    """A corpus record with n one-line equations, each emitting one StableHLO line: a 5,000-line listing."""
    jaxpr = ["{ lambda ; v0:f32[8]. let"]
    hlo = ["module @jit_long attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {",
           "  func.func public @main(%arg0: tensor<8xf32>) -> (tensor<8xf32>) {"]
    eqns, groups, ops = [], [], []
    for k in range(n):
        prev = f"v{k}"
        jaxpr.append(f"    v{k + 1}:f32[8] = add {prev} {prev}")
        hlo.append(f"    %{k} = stablehlo.add {'%arg0' if k == 0 else f'%{k - 1}'}, {'%arg0' if k == 0 else f'%{k - 1}'} : tensor<8xf32>")
        aval = {"shape": [8], "dtype": "float32"}
        eqns.append({"id": k, "parent": None, "primitive": "add", "params": {}, "inputs": [aval, aval],
                     "outputs": [aval], "jaxpr_lines": [k + 2, k + 2]})
        groups.append({"eqn": k, "jaxpr_lines": [k + 2], "stablehlo_lines": [k + 3]})
        ops.append({"name": "stablehlo.add", "line": k + 3, "function": "main"})
    jaxpr.append(f"  in (v{n},) }}")
    hlo += [f"    return %{n - 1} : tensor<8xf32>", "  }", "}"]
    return {"slug": "long", "title": "a long chain of adds", "lesson": "Five thousand lines, one hover.",
            "entry": "x.py:long", "args": ["f32[8]"], "mesh": None, "in_specs": None, "source": "def long(x): ...",
            "jaxpr": "\n".join(jaxpr), "stablehlo": "\n".join(hlo), "eqns": eqns, "xray": groups,
            "stablehlo_ops": ops, "lowered_to_nothing": [], "compiled": {"cpu": long_compiled(n)},
            "xray_stats": {"equations": n, "mapped_equations": n, "jaxpr_lines": len(jaxpr), "mapped_jaxpr_lines": n,
                           "stablehlo_lines": len(hlo), "stablehlo_op_lines": n, "mapped_stablehlo_op_lines": n}}


def long_compiled(n: int, per: int = 10) -> dict:
    """Its compiled layer: the adds fused `per` at a time, each fusion's body above the entry computation."""
    text = ["HloModule jit_long, is_scheduled=true", ""]
    instructions, fusions, lines = [], [], {}

    def emit(line, name, opcode, computation, eqns):
        text.append(line)
        instructions.append({"line": len(text), "name": name, "opcode": opcode, "computation": computation,
                             "eqns": eqns, "via": "tag" if eqns else "none"})
        for e in eqns:
            lines.setdefault(str(e), []).append(len(text))

    for b in range(n // per):
        text.append(f"%fused_computation.{b} (param_0.{b}: f32[8]) -> f32[8] {{")
        emit(f"  %param_0.{b} = f32[8]{{0}} parameter(0)", f"param_0.{b}", "parameter", f"fused_computation.{b}", [])
        for k in range(b * per, (b + 1) * per):
            prev = f"%param_0.{b}" if k == b * per else f"%add.{k - 1}"
            root = "ROOT " if k == (b + 1) * per - 1 else ""
            # A name stack is user-given text: one of them tries to become markup.
            where = "jit(long)/<img src=x id=pwned>add" if k == 7 else "jit(long)/add"
            emit(f'  {root}%add.{k} = f32[8]{{0}} add({prev}, {prev}), metadata={{op_name="{where}"}}',
                 f"add.{k}", "add", f"fused_computation.{b}", [k])
        text += ["}", ""]
    text.append("ENTRY %main (x: f32[8]) -> f32[8] {")
    emit("  %x = f32[8]{0} parameter(0)", "x", "parameter", "main", [])
    for b in range(n // per):
        prev = "%x" if b == 0 else f"%add_fusion.{b - 1}"
        root = "ROOT " if b == n // per - 1 else ""
        eqns = list(range(b * per, (b + 1) * per))
        emit(f"  {root}%add_fusion.{b} = f32[8]{{0}} fusion({prev}), kind=kLoop, calls=%fused_computation.{b}",
             f"add_fusion.{b}", "fusion", "main", eqns)
        fusions.append({"line": len(text), "name": f"add_fusion.{b}", "kind": "kLoop", "eqns": eqns})
    text.append("}")
    own = sum(1 for i in instructions if not i["eqns"])
    return {"text": "\n".join(text), "backend": "cpu", "jaxlib_version": "0.10.2", "host": "test",
            "host_id": "test",
            "instructions": instructions, "fusions": fusions, "lines_by_eqn": lines,
            "stats": {"instructions": len(instructions), "with_op_name": n, "arguments": 1,
                      "attributed": len(instructions) - own, "unattributed_with_op_name": 0,
                      "compiler_own": own, "fusions": len(fusions),
                      "by_tag": len(instructions) - own, "inferred": 0, "in_regions": 0}}


@pytest.fixture(scope="module")
def long_url(built_once_dir, corpus, serve_directory):
    def build_into(out):
        from dumpgym.site import build
        from dumpgym.drills import build_pool

        data = {**corpus, "programs": [corpus["programs"][0], long_program(5000)]}
        kinds = build_pool({**corpus, "programs": corpus["programs"][:1]})["kinds"]  # the page's tabs, no items
        build.build_site(out, data, {"schema": "dumpgym.drills/1", "kinds": kinds, "items": []})

    out = built_once_dir("long-site", build_into)
    with serve_directory(out) as url:
        yield url


def test_hover_lights_the_right_lines_on_a_5000_line_listing(open_fresh, long_url):
    page = open_fresh(long_url, **DESKTOP)
    errors = page.console.uncaught
    open_xray(page, "long")
    # Every seventh line of a column, hovered in turn, lights its own equations in another column.
    swept = {layer: dict(page.evaluate("""([layer, other]) => {
        const rows = [...document.querySelectorAll(`[data-xray-col=${layer}] [data-line]`)];
        const out = [];
        for (let i = 0; i < rows.length; i += 7) {
            rows[i].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
            const on = [...document.querySelectorAll(`[data-xray-col=${other}] .on`)];
            out.push([Number(rows[i].dataset.line), on.map((e) => Number(e.dataset.line)).sort((a, b) => a - b)]);
        }
        return out;
    }""", [layer, other])) for layer, other in (("jaxpr", "stablehlo"), ("hlo", "jaxpr"))}
    eqn_lines = {line: [line + 1] for line in swept["jaxpr"] if 2 <= line <= 5001}  # equation k: jaxpr k+2, StableHLO k+3
    assert len(eqn_lines) > 700 and {line: swept["jaxpr"][line] for line in eqn_lines} == eqn_lines
    compiled = {i["line"]: sorted(e + 2 for e in i["eqns"]) for i in long_compiled(5000)["instructions"] if i["eqns"]}
    hovered = {line: compiled[line] for line in swept["hlo"] if line in compiled}
    assert len(hovered) > 500 and {line: swept["hlo"][line] for line in hovered} == hovered
    page.hover("[data-xray-col=jaxpr] [data-line='4000']")
    assert lit(page, "stablehlo") == [4001]
    top = page.evaluate("document.querySelector('[data-xray-col=stablehlo]').scrollTop")
    assert top > 1000  # the other columns scrolled to the group
    assert page.evaluate("document.querySelector('[data-xray-col=hlo]').scrollTop") > 1000
    fusion = "[data-xray-compiled] [data-fusion-line]"
    page.locator(fusion).last.hover()  # the last fusion: ten adds at the end of the chain
    assert sorted(lit(page, "jaxpr")) == list(range(4992, 5002))
    assert page.locator("#pwned").count() == 0
    assert "<img src=x id=pwned>" in page.locator("[data-xray-col=hlo]").text_content()
    close_pages(page.context)
    assert errors == []


def test_a_target_the_program_lacks_is_no_layer_not_another_targets(page):
    """An added program compiled for the CPU only has no TPU or GPU layer to switch to."""
    got = page.evaluate("""async () => {
        const { compiledLayer } = await import('./static/compiled.js');
        const cpuOnly = { compiled: { cpu: { backend: 'cpu' } } };
        return ['cpu', 'tpu', 'gpu'].map((t) => compiledLayer(cpuOnly, t)?.backend ?? null);
    }""")
    assert got == ["cpu", None, None]
