"""The programs of real training in Chromium: a TPU-only program shows its TPU compile and says why it
has no CPU one; compiled opcodes link to their cards."""
import pytest

pytestmark = pytest.mark.browser


def test_a_tpu_only_program_shows_its_tpu_compile_and_says_why_there_is_no_cpu_one(page):
    article = page.locator('article[data-program="pallas-matmul"]')
    article.scroll_into_view_if_needed()
    article.locator('[data-layer-tab="hlo"]').click()
    panel = article.locator('[data-layer-panel="hlo"]')
    panel.locator("[data-line]").first.wait_for()
    assert "custom-call" in panel.inner_text() and "T(8,128)" in panel.inner_text()  # the TPU's text
    article.locator("[data-xray-open]").click()
    note = page.locator("[data-xray-platform-note]")
    note.wait_for()
    assert "No CPU or GPU compile" in note.inner_text()
    assert page.locator("[data-xray-targets]").is_hidden()  # nothing to switch to
    # the compiled listing links its opcodes to their cards
    link = page.locator('#xray [data-xray-col="hlo"] a.o', has_text="custom-call").first
    assert link.get_attribute("href") == "#op-hlo-custom-call"
