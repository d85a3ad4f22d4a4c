"""The fusion and kernel drills of a dump without a jaxpr, checked against the same compile dumped with one.

One run dumps the programs of `tests/dump_drill_programs.py` with JAX's jaxpr and StableHLO beside XLA's files; the
same folder without the jaxpr is JAX's default dump, and without any of JAX's files XLA's alone: one compile, so
every fusion and kernel has one name in the three. Each record is added as users add it (`add --dump --module`). A
fusion item of a dump without a jaxpr names lines of the StableHLO (JAX's default) or of the HLO before
optimisations (XLA alone); where the dump with the jaxpr asks of the same fusion, the equations those lines are
(the StableHLO is the same text, linked there to the jaxpr JAX dumped) or the primitives JAX named them after (each
line's `op_name`, JAX's name stack) are exactly that item's; where it does not, every one of them is among the
equations that compile's attribution puts in the fusion. Each primitive is one JAX traces of the function. A kernel
item of a TPU dump names, for a dot before optimisations, the kernel the dump with the jaxpr names for a dot_general
of the same dimension numbers and operand types, which JAX traces of the function too.
"""
import json
import re
import shutil
from collections import Counter

import pytest

from dump_drill_programs import added_pool, jax_equations
from dump_programs import make_dump
from dumpgym.record.schema import ProgramRecord
from pool_checks import assert_pool_item, readable

NAMES = ("rnn_train_step", "fit_while", "remat_mlp_step", "transformer_train_step")
# The folder's files each form keeps: all (the jaxpr's form), all but the jaxpr (JAX's default), XLA's alone.
FORMS = {"jaxpr": lambda name: True, "jax-default": lambda name: not name.endswith(".jaxpr.txt"),
         "xla": lambda name: not name.startswith("jax_")}


def _forms(root, platform: str) -> dict[str, tuple[dict, dict]]:
    """Each form's pool and records, from one dump made with the jaxpr and StableHLO beside XLA's files."""
    full = make_dump(root / "dump", NAMES, platform, module="dump_drill_programs", jax_modes="jaxpr,stablehlo")
    out = {}
    for form, keep in FORMS.items():
        folder = root / form
        folder.mkdir()
        for path in full.iterdir():
            if path.is_file() and keep(path.name):
                shutil.copy(path, folder / path.name)
        out[form] = added_pool(folder, root / f"corpus-{form}", NAMES)
    return out


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    return _forms(tmp_path_factory.mktemp("fusions-cpu"), "cpu")


def _items(pool: dict, record: ProgramRecord, drill: str) -> list[dict]:
    return [i for i in pool["items"] if i["program"] == record.slug and i["drill"] == drill]


def _primitive(line: str) -> str | None:
    """The primitive JAX named an instruction before optimisations after: its op_name's last name."""
    found = re.search(r'op_name="([^"]*)"', line)
    return found.group(1).rsplit("/", 1)[-1] if found else None


# What a scan lowers through to read its input and write its stacked output (`dynamic_index_in_dim`: a slice and a
# squeeze; `dynamic_update_index_in_dim`: a one-row slab and an update), named after those, not after its equations.
_SCAN_OWN = {"dynamic_slice", "squeeze", "dynamic_update_slice", "broadcast_in_dim"}


def _leaves(record: ProgramRecord, eqns) -> set[int]:
    return {e for e in eqns if not record.eqns[e].has_subjaxpr}


def _within(record: ProgramRecord, eqns) -> set[int]:
    """The equations and every equation nested in them."""
    out, work = set(), list(eqns)
    while work:
        e = work.pop()
        if e not in out:
            out.add(e)
            work += [x.id for x in record.eqns if x.parent == e]
    return out


def _check_fusions(forms: dict, target: str) -> Counter:
    """Every fusion item of the two forms without a jaxpr, against the form with one (above)."""
    pool_j, records_j = forms["jaxpr"]
    checked = Counter()
    for form in ("jax-default", "xla"):
        pool, records = forms[form]
        for name in NAMES:
            record, traced = records[name], records_j[name]
            assert not record.eqns and traced.eqns
            jaxpr_items = {(i["facts"]["fusion"], i["layer"]): i for i in _items(pool_j, traced, "fusions")}
            fusions = {f.name: f for f in traced.compiled[target].fusions}
            primitives = {e.primitive.name for e in jax_equations(name)}
            owners: dict[int, set[int]] = {}
            for g in traced.xray:
                for n in g.stablehlo_lines:
                    owners.setdefault(n, set()).add(g.eqn)
            before = record.dump.hlo_before.splitlines()
            for item in _items(pool, record, "fusions"):
                assert_pool_item(item, set())
                shown = readable(item, record)
                lines = shown["answer_lines"]
                assert item["layer"] == target and lines == item["facts"]["lines"]
                tapped = record.stablehlo if form == "jax-default" else record.dump.hlo_before
                assert shown["shown"][0].rstrip("\n") == tapped.rstrip("\n")  # the whole layer, to tap in
                twin = jaxpr_items.get((item["facts"]["fusion"], item["layer"]))
                attributed = _within(traced, fusions[item["facts"]["fusion"]].eqns)
                if form == "jax-default":
                    assert record.stablehlo == traced.stablehlo  # one text: its lines are the jaxpr's form's
                    eqns = _leaves(traced, set().union(*(owners.get(n, set()) for n in lines)))
                    if twin is not None:
                        assert eqns == set(twin["facts"]["eqns"]), (name, item["card"], eqns, twin["facts"])
                    assert eqns <= attributed, (name, item["card"], eqns, attributed)
                else:
                    named = {_primitive(before[n - 1]) for n in lines}
                    looped = any(traced.eqns[e].primitive == "scan" for e in attributed)
                    own = _SCAN_OWN if looped else set()
                    assert None not in named and named <= primitives | own, (name, item["card"], named)
                    if twin is not None:
                        assert named == {traced.eqns[e].primitive for e in twin["facts"]["eqns"]}, (name, item["card"])
                    assert named <= {traced.eqns[e].primitive for e in attributed} | own, (name, item["card"], named)
                checked[form, "twin" if twin is not None else "alone"] += 1
    return checked


def test_a_fusion_of_a_dump_without_a_jaxpr_fuses_what_the_dump_with_one_names(cpu):
    """On the CPU, each form without a jaxpr asks fusions, and where the jaxpr's form asks the same fusion, the two
    answers are one set of ops (above): the StableHLO's form at least 15 such, XLA's alone at least 6."""
    checked = _check_fusions(cpu, "cpu")
    assert checked["jax-default", "twin"] >= 15 and checked["xla", "twin"] >= 6, checked


def test_a_fusion_is_asked_only_where_every_instruction_of_its_body_links_exactly(cpu):
    """Each answered line is reached by an exact link of an instruction of the fusion's body (the record's), and no
    instruction of the body that computes (no parameter, constant, tuple plumbing, bitcast or copy) is left unlinked."""
    for form, key in (("jax-default", "stablehlo_links"), ("xla", "before_links")):
        pool, records = cpu[form]
        asked = 0
        for record in records.values():
            links = getattr(record.dump, key)
            hlo = record.compiled["cpu"]
            for item in _items(pool, record, "fusions"):
                for n, hlo_lines in item["facts"]["linked"].items():
                    assert all(int(n) in (links[str(h)] if key == "stablehlo_links" else (links[str(h)],))
                               for h in hlo_lines)
                called = {i.line: i for i in hlo.instructions}[item["facts"]["hlo_line"]].calls
                body = [i for i in hlo.instructions if i.computation in called]
                assert all(str(i.line) in links or i.opcode in ("parameter", "constant", "tuple", "gettupleelement",
                                                                "fusion", "bitcast", "copy") for i in body)
                asked += 1
        assert asked >= 8, (form, asked)


def test_a_record_without_the_links_still_loads_and_asks_no_fusion(cpu):
    """The exact links are left out of a record's JSON where there are none (a traced program's, a dump's with a
    jaxpr): a record written before them loads with none and asks no fusion of a dump without a jaxpr."""
    from dumpgym.drills.fusions import fusion_items

    _pool, records = cpu["jax-default"]
    written = records["fit_while"].to_json()
    assert written["dump"]["stablehlo_links"] and written["dump"]["before_links"]
    older = {**written, "dump": {k: v for k, v in written["dump"].items()
                                 if k not in ("stablehlo_links", "before_links", "before_undecided")}}
    loaded = ProgramRecord.from_json(json.loads(json.dumps(older)))
    assert not loaded.dump.stablehlo_links and not fusion_items(loaded)
    assert "stablehlo_links" not in cpu["jaxpr"][1]["fit_while"].to_json()["dump"]


def _same_dot(eqn, dot) -> bool:
    """Whether an equation's dimension numbers and operand avals are those of a dot the record read before optimisations."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"] if hasattr(eqn, "params") else eqn.param("dimension_numbers")
    dims = (tuple(lc), tuple(rc), tuple(lb), tuple(rb))
    avals = [v.aval.str_short(short_dtypes=True) for v in eqn.invars] if hasattr(eqn, "invars") else \
        [str(a) for a in eqn.input_avals]
    return dims == (dot.dims.lhs_contracting, dot.dims.rhs_contracting, dot.dims.lhs_batch, dot.dims.rhs_batch) and \
        avals == [f"{a.dtype}[{','.join(map(str, a.dims))}]" for a in (dot.lhs, dot.rhs)]


@pytest.mark.needs_tpu
def test_a_tpu_dump_without_a_jaxpr_asks_which_kernel_runs_a_dot_as_the_dump_with_one_answers(tmp_path):
    """On a TPU v5e compile, each kernel item of a form without a jaxpr names, for a dot before optimisations, the
    kernel that the jaxpr's form names for a dot_general of the same dimension numbers and operand types (a
    dot_general JAX traces of the function); the remat MLP's and the transformer's dots give ten items or more
    each way; and the fusion items hold as on the CPU."""
    forms = _forms(tmp_path, "tpu")
    pool_j, records_j = forms["jaxpr"]
    for form in ("jax-default", "xla"):
        pool, records = forms[form]
        count = Counter()
        for name in NAMES:
            record, traced = records[name], records_j[name]
            runs: dict[str, list] = {}
            for i in _items(pool_j, traced, "kernels"):
                runs.setdefault(i["facts"]["instruction"], []).append(traced.eqns[i["eqn"]])
            at = {d.line: d for d in record.dump.dots}
            traced_dots = [e for e in jax_equations(name) if e.primitive.name == "dot_general"]
            for item in _items(pool, record, "kernels"):
                assert_pool_item(item, set())
                shown = readable(item, record)
                dot = at[item["facts"]["line"]]
                assert shown["options"][shown["answer"]].startswith(f"%{item['facts']['instruction']} ")
                assert any(_same_dot(e, dot) for e in runs.get(item["facts"]["instruction"], [])), (name, item["card"])
                assert any(_same_dot(e, dot) for e in traced_dots), (name, item["card"])
                count[name] += 1
        assert count["remat_mlp_step"] >= 5 and count["transformer_train_step"] >= 10, (form, count)
    checked = _check_fusions(forms, "tpu")
    assert checked["jax-default", "twin"] + checked["jax-default", "alone"] >= 10, checked
