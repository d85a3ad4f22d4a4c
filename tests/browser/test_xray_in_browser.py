"""The x-ray view in Chromium: hover lights both columns, clicks pin, j/k walk, dim lines explain themselves."""
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


def test_hover_work_does_not_grow_with_the_listing(page):
    """Hovering every line of the longest program stays fast: the lookups are precomputed per program."""
    open_xray(page, "scan")
    elapsed = page.evaluate("""() => {
        const rows = [...document.querySelectorAll('[data-xray-col=jaxpr] [data-line]')];
        const t0 = performance.now();
        for (const r of rows) r.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
        return (performance.now() - t0) / rows.length;
    }""")
    assert elapsed < 2.0, f"{elapsed:.2f} ms per hover"


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
            "entry": "x.py:long", "args": ["f32[8]"], "mesh": None, "source": "def long(x): ...",
            "jaxpr": "\n".join(jaxpr), "stablehlo": "\n".join(hlo), "eqns": eqns, "xray": groups,
            "stablehlo_ops": ops, "lowered_to_nothing": [], "xray_stats": {}}


@pytest.fixture(scope="module")
def long_url(tmp_path_factory, corpus, serve_directory):
    from dumpgym import site

    data = {**corpus, "programs": [corpus["programs"][0], long_program(5000)]}
    out = tmp_path_factory.mktemp("long-site")
    site.build_site(out, data, {"schema": "dumpgym.drills/1", "items": []})
    with serve_directory(out) as url:
        yield url


def test_hover_stays_smooth_on_a_5000_line_listing(browser, long_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(long_url)
    page.wait_for_selector("html[data-ready]")
    open_xray(page, "long")
    per_hover = page.evaluate("""() => {
        const rows = [...document.querySelectorAll('[data-xray-col=jaxpr] [data-line]')];
        const t0 = performance.now();
        for (let i = 0; i < rows.length; i += 7) rows[i].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
        return (performance.now() - t0) / Math.ceil(rows.length / 7);
    }""")
    page.hover("[data-xray-col=jaxpr] [data-line='4000']")
    assert lit(page, "stablehlo") == [4001]
    top = page.evaluate("document.querySelector('[data-xray-col=stablehlo]').scrollTop")
    assert top > 1000  # the other column scrolled to the group
    context.close()
    assert errors == []
    print(f"{per_hover:.3f} ms per hover on 5,000 lines")
    assert per_hover < 4.0, f"{per_hover:.2f} ms per hover on 5,000 lines"
