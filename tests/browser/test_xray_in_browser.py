"""The x-ray view in Chromium: hover lights every column, clicks pin, j/k walk, dim lines explain themselves,
and the compiled column shows fusions as units and XLA's own instructions as such."""
import pytest

pytestmark = pytest.mark.browser


def open_xray(page, slug):
    page.locator("#xray").scroll_into_view_if_needed()
    page.select_option("[data-xray-pick]", slug)
    page.wait_for_selector(f"#xray[data-ready][data-program='{slug}']")


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
    """Whether a line of a column is inside that column's scrolled box."""
    return page.evaluate("""([layer, line]) => {
        const col = document.querySelector(`[data-xray-col=${layer}]`);
        const r = col.querySelector(`[data-line="${line}"]`).getBoundingClientRect(), c = col.getBoundingClientRect();
        return r.bottom > c.top && r.top < c.bottom;
    }""", [layer, line])


def group_of(program, eqn):
    return next(g for g in program["xray"] if g["eqn"] == eqn)


def test_hovering_a_gelu_line_lights_its_equation_in_all_three_columns(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    assert visible_columns(page) == ["jaxpr", "stablehlo", "hlo"]
    tanh = next(e for e in program["eqns"] if e["primitive"] == "tanh")  # the GELU's tanh
    group = group_of(program, tanh["id"])
    compiled = program["hlo"]["lines_by_eqn"][str(tanh["id"])]
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
    dot = next(i for i in program["hlo"]["instructions"] if i["opcode"] == "dot")
    group = group_of(program, dot["eqns"][0])
    page.hover(f"[data-xray-col=hlo] [data-line='{dot['line']}']")
    assert sorted(lit(page, "jaxpr")) == sorted(group["jaxpr_lines"])
    assert sorted(lit(page, "stablehlo")) == sorted(group["stablehlo_lines"])
    assert in_view(page, "stablehlo", min(group["stablehlo_lines"]))


def test_hovering_a_fusion_line_lights_every_equation_it_absorbed(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    fusion = max(program["hlo"]["fusions"], key=lambda f: len(f["eqns"]))
    assert len(fusion["eqns"]) > 3  # the GELU chain, fused into one loop
    groups = [group_of(program, e) for e in fusion["eqns"]]
    page.hover(f"[data-xray-col=hlo] [data-line='{fusion['line']}']")
    assert sorted(lit(page, "jaxpr")) == sorted({n for g in groups for n in g["jaxpr_lines"]})
    assert sorted(lit(page, "stablehlo")) == sorted({n for g in groups for n in g["stablehlo_lines"]})
    hlo_lines = {n for e in fusion["eqns"] for n in program["hlo"]["lines_by_eqn"][str(e)]}
    assert sorted(lit(page, "hlo")) == sorted(hlo_lines)
    # Each absorbed equation keeps its own colour band.
    bands = {page.get_attribute(f"[data-xray-col=jaxpr] [data-line='{g['jaxpr_lines'][0]}']", "class").split()[1]
             for g in groups}
    assert len(bands) > 1
    status = page.locator("[data-xray-status]").inner_text()
    assert f"fusion %{fusion['name']}" in status and f"absorbing {len(fusion['eqns'])} equations" in status
    # The computation the fusion calls is shown as its body, XLA's own converts included.
    called = program["hlo"]["text"].split("\n")[fusion["line"] - 1].split("calls=%")[1].split(",")[0]
    body = [i["line"] for i in program["hlo"]["instructions"] if i["computation"] == called]
    body_shown = page.eval_on_selector_all("[data-xray-col=hlo] .fb", "els => els.map(e => Number(e.dataset.line))")
    assert set(body) <= set(body_shown)


def test_a_line_xla_wrote_on_its_own_is_marked_and_lights_nothing(page, fetch_json):
    open_xray(page, "mlp")
    program = fetch_json("data/programs/mlp.json")
    fusion_lines = {f["line"] for f in program["hlo"]["fusions"]}
    own = next(i for i in program["hlo"]["instructions"]
               if not i["eqns"] and i["opcode"] == "convert" and i["line"] not in fusion_lines)
    row = page.locator(f"[data-xray-col=hlo] [data-line='{own['line']}']")
    assert "x" in row.get_attribute("class").split()
    row.hover()
    assert lit(page, "jaxpr") == lit(page, "stablehlo") == lit(page, "hlo") == []
    assert "XLA's own: no equation wrote this" in page.locator("[data-xray-status]").inner_text()
    assert row.get_attribute("title").startswith("XLA's own: no equation wrote this")
    marked = page.eval_on_selector_all("[data-xray-col=hlo] .x", "els => els.length")
    assert marked == sum(1 for i in program["hlo"]["instructions"] if not i["eqns"])


def test_an_instruction_whose_metadata_xla_dropped_lights_its_inferred_equation(page, fetch_json):
    """moe's `%dot.3` has no op_name; the record infers it is the last einsum's dot, and the page says so."""
    open_xray(page, "moe")
    program = fetch_json("data/programs/moe.json")
    dot = next(i for i in program["hlo"]["instructions"] if i["name"] == "dot.3")
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
    }""", [src, program["hlo"], dot["line"]])
    assert note == f"XLA dropped this instruction's metadata; it computes equation {dot['eqns'][0]} (inferred)"
    assert note in page.inner_text("[data-xray-status]")  # said on the status line while hovered


def test_the_backend_and_the_counts_come_from_the_record(page, fetch_json):
    open_xray(page, "mlp")
    hlo = fetch_json("data/programs/mlp.json")["hlo"]
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
    assert buttons.count() == len(program["hlo"]["fusions"])
    for k, fusion in enumerate(program["hlo"]["fusions"]):
        text = buttons.nth(k).inner_text()
        assert f"%{fusion['name']}" in text and fusion["kind"] in text
        for e in fusion["eqns"]:
            assert f"{eqns[e]['primitive']} · jaxpr {eqns[e]['jaxpr_lines'][0]}" in text
        if not fusion["eqns"]:
            assert "XLA's own" in text
    fusion = max(program["hlo"]["fusions"], key=lambda f: len(f["eqns"]))
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
    assert sorted(lit(page, "hlo")) == sorted(program["hlo"]["lines_by_eqn"].get(str(first["eqn"]), []))
    assert lit(page, "hlo")


def test_at_375_pixels_the_columns_stack_and_a_tap_scrolls_the_compiled_one_off_screen(browser, base_url, fetch_json):
    """The compiled column is below the fold when the tap lands, its blocks never laid out: the
    column must still be tall enough to scroll to the line (long wrapped lines outgrow the estimate)."""
    context = browser.new_context(viewport={"width": 375, "height": 800}, has_touch=True, is_mobile=True)
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(base_url)
    pg.wait_for_selector("html[data-ready]")
    program = fetch_json("data/programs/mlp.json")
    tanh = next(e for e in program["eqns"] if e["primitive"] == "tanh")
    compiled = program["hlo"]["lines_by_eqn"][str(tanh["id"])]
    # Chosen and tapped from script while the section is far off screen, so nothing of it is laid out.
    pg.evaluate("""() => { const pick = document.querySelector('[data-xray-pick]');
        pick.value = 'mlp'; pick.dispatchEvent(new Event('change')); }""")
    pg.wait_for_selector("#xray[data-ready][data-program='mlp']", state="attached")
    pg.evaluate(f"document.querySelector(\"[data-xray-col=jaxpr] [data-line='{tanh['jaxpr_lines'][0]}']\").click()")
    assert sorted(lit(pg, "hlo")) == sorted(compiled)
    pg.locator("[data-xray-col=hlo]").scroll_into_view_if_needed()
    assert in_view(pg, "hlo", min(compiled))
    boxes = pg.eval_on_selector_all("#xray .col", "els => els.map(e => e.getBoundingClientRect().left)")
    assert len(set(boxes)) == 1  # stacked
    assert pg.evaluate("document.documentElement.scrollWidth") <= 375
    context.close()
    assert errors == []


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
            "stablehlo_ops": ops, "lowered_to_nothing": [], "hlo": long_compiled(n),
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
def long_url(tmp_path_factory, corpus, serve_directory):
    from dumpgym import build

    data = {**corpus, "programs": [corpus["programs"][0], long_program(5000)]}
    out = tmp_path_factory.mktemp("long-site")
    from dumpgym.drills import build_pool

    kinds = build_pool({**corpus, "programs": corpus["programs"][:1]})["kinds"]  # the page's tabs, no items
    build.build_site(out, data, {"schema": "dumpgym.drills/1", "kinds": kinds, "items": []})
    with serve_directory(out) as url:
        yield url


def test_hover_lights_the_right_lines_on_a_5000_line_listing(browser, long_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(long_url)
    page.wait_for_selector("html[data-ready]")
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
    context.close()
    assert errors == []
