"""The notebook x-ray rendered into a real page: hovering a line lights every column, render by render.

What should light is read from JAX's own objects (its jaxpr, its StableHLO, and XLA's compile of the
program made in the same test), never from the widget's groups.
"""
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

import dumpgym

X, W = jax.ShapeDtypeStruct((4, 8), jnp.float32), jax.ShapeDtypeStruct((8, 2), jnp.float32)
# The same program, rendered by a Python process of its own (a kernel restart, another notebook).
RENDER = textwrap.dedent("""
    import jax.numpy as jnp
    import dumpgym

    def mlp(x, w):
        return jnp.tanh(x @ w) * 2.0

    print(dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_())
""")
INSTRUCTION = re.compile(r"\s*(?:ROOT )?%([\w.-]+) = ")


def mlp(x, w):
    return jnp.tanh(x @ w) * 2.0


def lines_matching(text: str, pattern: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), start=1) if re.search(pattern, line)]


@pytest.fixture(scope="module")
def tanh():
    """The jaxpr and StableHLO lines of mlp's `tanh`, as JAX prints them."""
    return {"jaxpr": lines_matching(str(jax.jit(mlp).trace(X, W).jaxpr), r"= tanh "),
            "stablehlo": lines_matching(jax.jit(mlp).lower(X, W).as_text(), r"stablehlo\.tanh ")}


def lit(page, render, layer):
    return page.eval_on_selector_all(f'.dgx >> nth={render} >> [data-layer="{layer}"] .l.on',
                                     "els => els.map(e => +e.dataset.line)")


def column_text(page, render, layer):
    return page.eval_on_selector_all(f'.dgx >> nth={render} >> [data-layer="{layer}"] .l',
                                     "els => els.map(e => e.textContent)")


def open_page(browser, body, errors):
    page = browser.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.set_content(f"<!doctype html><html><body>{body}</body></html>")
    return page


@pytest.mark.browser
def test_rendered_xray_hovers_in_chromium(browser, tanh):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    errors = []
    page = open_page(browser, view._repr_html_(), errors)
    assert "\n".join(column_text(page, 0, "jaxpr")) == str(jax.jit(mlp).trace(X, W).jaxpr)
    page.hover(f'[data-layer="jaxpr"] .l[data-line="{tanh["jaxpr"][0]}"]')
    lit_j, lit_s = lit(page, 0, "jaxpr"), lit(page, 0, "stablehlo")
    page.mouse.move(0, 0)
    unlit = lit(page, 0, "jaxpr")
    page.close()
    assert (lit_j, lit_s) == (tanh["jaxpr"], tanh["stablehlo"])
    assert unlit == []
    assert errors == []


def render_in_processes(count: int) -> list[str]:
    """`_repr_html_()` of mlp's x-ray, each from a fresh Python process (run side by side)."""
    procs = [subprocess.Popen([sys.executable, "-c", RENDER], stdout=subprocess.PIPE, text=True, encoding="utf-8")
             for _ in range(count)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * count
    return outs


@pytest.mark.browser
def test_renders_from_two_processes_in_one_page_light_only_themselves(browser, tanh):
    first, second = render_in_processes(2)
    errors = []
    page = open_page(browser, first + second, errors)
    ids = page.eval_on_selector_all(".dgx", "els => els.map(e => e.id)")
    page.hover(f'.dgx >> nth=1 >> [data-layer="stablehlo"] .l[data-line="{tanh["stablehlo"][0]}"]')
    seen = [(lit(page, k, "jaxpr"), lit(page, k, "stablehlo")) for k in (0, 1)]
    page.close()
    assert len(set(ids)) == 2
    assert seen == [([], []), (tanh["jaxpr"], tanh["stablehlo"])]
    assert errors == []


@pytest.mark.browser
def test_the_same_output_shown_twice_lights_each_copy(browser, tanh):
    # JupyterLab's "new view for output" shows one output's HTML again, id and all.
    html = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")._repr_html_()
    errors = []
    page = open_page(browser, html + html, errors)
    seen = []
    for k in (1, 0):
        page.hover(f'.dgx >> nth={k} >> [data-layer="jaxpr"] .l[data-line="{tanh["jaxpr"][0]}"]')
        seen.append([lit(page, r, "stablehlo") for r in (0, 1)])
    page.close()
    assert seen == [[[], tanh["stablehlo"]], [tanh["stablehlo"], []]]
    assert errors == []


def compiled_instructions(text: str) -> dict[str, tuple[str, str | None, list[str]]]:
    """Each instruction of compiled HLO text: its computation, its op_name (None without one) and the
    computations it calls."""
    out, computation = {}, None
    for line in text.splitlines():
        if header := re.match(r"(?:ENTRY )?%([\w.-]+) \(", line):
            computation = header[1]
        elif ins := INSTRUCTION.match(line):
            op_name = re.search(r'op_name="([^"]*)"', line)
            out[ins[1]] = (computation, op_name and op_name[1], re.findall(r"\bcalls=%([\w.-]+)", line))
    return out


def tagged_with(instructions, primitive: str) -> set[str]:
    """Instructions whose op_name JAX ended with `primitive`, and the fusions calling (at any depth)
    a computation that holds one."""
    found = {name for name, (_, op_name, _) in instructions.items() if op_name and op_name.endswith(f"/{primitive}")}
    while True:
        holding = {instructions[name][0] for name in found}
        more = {name for name, (_, _, calls) in instructions.items() if set(calls) & holding} - found
        if not more:
            return found
        found |= more


@pytest.mark.browser
def test_compiled_column_links_all_three_layers(browser, tanh):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]", compiled=True)
    # XLA's compile of the same program, made here: what it fuses depends on the host CPU.
    instructions = compiled_instructions(jax.jit(mlp).lower(X, W).compile().as_text())
    expected = tagged_with(instructions, "tanh")
    # XLA may drop an instruction's metadata; dumpgym then infers its equation from dataflow.
    unnamed = {name for name, (_, op_name, _) in instructions.items() if op_name is None}
    fusion = next(name for name in expected if instructions[name][2])
    body = instructions[fusion][2][0]

    errors = []
    page = open_page(browser, view._repr_html_(), errors)
    hlo = column_text(page, 0, "hlo")
    line_of = {m[1]: n for n, text in enumerate(hlo, start=1) if (m := INSTRUCTION.match(text))}
    name_of = {n: name for name, n in line_of.items()}

    page.hover(f'[data-layer="jaxpr"] .l[data-line="{tanh["jaxpr"][0]}"]')
    from_jaxpr = {name_of.get(n, n) for n in lit(page, 0, "hlo")}
    page.hover(f'[data-layer="hlo"] .l[data-line="{line_of[next(n for n in expected if n != fusion)]}"]')
    from_hlo = lit(page, 0, "jaxpr"), lit(page, 0, "stablehlo")
    page.hover(f'[data-layer="hlo"] .l[data-line="{line_of[fusion]}"]')
    marked = page.eval_on_selector_all('[data-layer="hlo"] .l.fb', "els => els.map(e => +e.dataset.line)")
    fusion_lit = lit(page, 0, "jaxpr")
    page.close()

    assert expected <= from_jaxpr <= expected | unnamed
    assert from_hlo == (tanh["jaxpr"], tanh["stablehlo"])
    assert set(tanh["jaxpr"]) <= set(fusion_lit)
    # Hovering a fusion marks the computation it calls, from its signature to its closing brace.
    start = next(n for n, text in enumerate(hlo, start=1) if text.startswith(f"%{body} ("))
    end = next(n for n in range(start, len(hlo) + 1) if hlo[n - 1].startswith("}"))
    assert marked == list(range(start, end + 1))
    assert errors == []


@pytest.mark.browser
def test_saved_output_reads_as_utf8(browser, tmp_path, serve_directory):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]")
    stats = f"mlp · {view.stats.line()}"
    (tmp_path / "output.html").write_bytes(view._repr_html_().encode("utf-8"))  # the output, saved as it is
    view.save(tmp_path / "page.html")
    page = browser.new_page()
    seen = []
    for name in ("output.html", "page.html"):
        page.goto((tmp_path / name).as_uri())
        seen.append(page.inner_text(".dgx-stats"))
    # Served without a charset, Chromium does not guess UTF-8 as it may for a file: only the declaration holds.
    with serve_directory(tmp_path) as url:
        for name in ("output.html", "page.html"):
            page.goto(url + name)
            seen.append(page.inner_text(".dgx-stats"))
    page.close()
    assert seen == [stats] * 4


CONTRAST = """root => {
  const rgba = (c) => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3])).concat(1);
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] === 1) break;
    }
    return layers.reduceRight((under, top) => over(top, under), [255, 255, 255, 1]);
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const out = [];
  for (const el of [root, ...root.querySelectorAll('*')]) {
    if (!el.getClientRects().length) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const bg = background(el);
    const fg = over(rgba(getComputedStyle(el).color), bg);
    const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    out.push({ what: `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}`, dim: el.matches('.l.u'),
               ratio: Math.round(((hi + 0.05) / (lo + 0.05)) * 100) / 100 });
  }
  return out;
}"""


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_colour_keeps_its_contrast(browser, scheme):
    view = dumpgym.xray(mlp, "f32[4,8]", "f32[8,2]", compiled=True)
    errors = []
    page = open_page(browser, view._repr_html_(), errors)
    page.emulate_media(color_scheme=scheme)
    hlo = column_text(page, 0, "hlo")
    fusion = next(n for n, text in enumerate(hlo, start=1) if " fusion(" in text)
    seen = page.eval_on_selector(".dgx", CONTRAST)  # nothing lit
    for layer, n in (("jaxpr", 2), ("hlo", fusion)):  # a line lit and hovered; a fusion's body marked
        page.hover(f'[data-layer="{layer}"] .l[data-line="{n}"]')
        seen += page.eval_on_selector(".dgx", CONTRAST)
    page.close()
    low = {(s["what"], s["ratio"]) for s in seen if s["ratio"] < (3 if s["dim"] else 4.5)}
    assert {s["what"].split(".")[0] for s in seen} >= {"p", "h4", "div"} and any(s["dim"] for s in seen)
    assert any("fb" in s["what"] for s in seen) and any("on" in s["what"].split(".") for s in seen)
    assert low == set()
    assert errors == []
