// Scrolling a line into view inside its own scrolling box (a listing column, a drill's line picker),
// never the page: the page stays where the reader put it. One exception: a question just asked brings the
// line it cites into the viewport (`showCited`, with `page`), as it brings itself.

/** Where `box` should scroll to bring `child` into view (a third of the way down), or null if it is in view. */
export function scrollTarget(box, child) {
  // Measured against the box, not offsetTop: a line's offsetParent may be a block between them.
  const top = child.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  const inView = top >= box.scrollTop && top + child.offsetHeight <= box.scrollTop + box.clientHeight;
  return inView ? null : { box, top: top - box.clientHeight / 3 };
}

const settling = new WeakMap();  // box -> the animation frame of its settle

/**
 * Scroll `box` as `move` says (a `scrollTarget`), then, for a few frames, again while `child` is still out of
 * view: a listing's blocks off screen are not laid out (`content-visibility`) and count at an estimate, which
 * a wrapped line makes short, so a first scroll lands near the line and the next, once laid out, on it.
 */
export function settleScroll(move, child) {
  if (!move) return;
  const { box } = move;
  box.scrollTop = move.top;
  cancelAnimationFrame(settling.get(box));
  let frames = 8;
  const again = () => {
    const next = child.isConnected ? scrollTarget(box, child) : null;
    if (!next || --frames < 0) return settling.delete(box);
    box.scrollTop = next.top;
    settling.set(box, requestAnimationFrame(again));
  };
  settling.set(box, requestAnimationFrame(again));
}

/** Scroll `box` so that `child` is its first line (a listing opened at a computation), again on the next frames
 * while the blocks above it are laid out and move it (see `settleScroll`). */
export function settleAtTop(box, child) {
  const topOf = () => child.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  box.scrollTop = topOf();
  cancelAnimationFrame(settling.get(box));
  let frames = 8;
  const again = () => {
    const top = child.isConnected ? topOf() : box.scrollTop;
    if (Math.abs(top - box.scrollTop) < 1 || --frames < 0) return settling.delete(box);
    box.scrollTop = top;
    settling.set(box, requestAnimationFrame(again));
  };
  settling.set(box, requestAnimationFrame(again));
}

/** Keep `child` in view inside the scrolling `box`, without scrolling the page. */
export function scrollIntoBox(box, child) {
  settleScroll(scrollTarget(box, child), child);
}

/** The line numbers a question cites ("line 15", "compiled HLO line 148"), in the order it says them. */
export function citedLines(question) {
  return [...String(question).matchAll(/\blines? (\d+)\b/gi)].map((m) => Number(m[1]));
}

/**
 * The box on screen of line `n` among the question's context: a line-view row numbered `n`, or the line of a
 * numbered block (`' 15  …'`) that starts with it. Returns {box, rect()} or null when no block shows it.
 */
function citedLine(root, n) {
  const row = root.querySelector(`[data-pick] [data-n="${n}"]`);
  if (row) return { box: row.closest('[data-pick]'), child: row, rect: () => row.getBoundingClientRect() };
  const start = new RegExp(`^ {0,3}${n}  `);
  for (const pre of root.querySelectorAll('[data-shown]')) {
    const text = pre.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE) continue;
    let offset = 0;
    for (const line of text.data.split('\n')) {
      if (start.test(line)) {
        const range = document.createRange();
        range.setStart(text, offset);
        range.setEnd(text, offset + line.length);
        return { box: pre, rect: () => range.getBoundingClientRect() };
      }
      offset += line.length + 1;
    }
  }
  return null;
}

/**
 * Bring the lines a question cites into view: each scrolling block that shows one scrolls to the first it
 * shows, and with `page`, when the first cited line is not in the viewport below the sticky header, the page
 * scrolls to show it: with the element `with` (the question) when both fit; else, on a narrow window, the line
 * just under the header, and on a wide one not at all (the question is read first); without `with`, just under
 * the header. Returns the first cited line's place, or null.
 */
export function showCited(root, question, { page = false, with: below = null } = {}) {
  const found = citedLines(question).map((n) => citedLine(root, n)).filter(Boolean);
  const done = new Set();
  for (const line of found) {
    if (done.has(line.box)) continue;
    done.add(line.box);
    const r = line.rect();
    const top = r.top - line.box.getBoundingClientRect().top + line.box.scrollTop;
    if (top < line.box.scrollTop || top + r.height > line.box.scrollTop + line.box.clientHeight) {
      line.box.scrollTop = top - line.box.clientHeight / 3;
    }
  }
  const first = found[0];
  if (!first || !page) return first ?? null;
  const header = document.querySelector('.top')?.getBoundingClientRect().bottom ?? 0;
  const r = first.rect();
  if (r.top >= header && r.bottom <= innerHeight) return first;
  const under = r.top - header - 12;  // the line just under the header
  if (!below) {
    scrollBy(0, under);
    return first;
  }
  // With the question: both in view where they fit. Where they do not, a wide window keeps the question where
  // it is (it is read first, its options beside it, the line in view in its own block); a narrow one, whose
  // blocks do not scroll on their own, shows the line just under the header.
  const q = below.getBoundingClientRect();
  const span = Math.max(r.bottom, q.bottom) - Math.min(r.top, q.top);
  if (span <= innerHeight - header - 24) scrollBy(0, Math.min(r.top, q.top) - header - 12);
  else if (innerWidth <= 700) scrollBy(0, under);
  return first;
}

/**
 * Keep the element the URL's hash names (`open`'s `#xray`) where the page was scrolled to it while what is above
 * it fills in (a drill asks its first question after the browser has jumped): Chromium's scroll anchoring leaves
 * the target pushed down there on a narrow screen. Each scroll (the browser's jump, the reader's) sets where it
 * is held; the hold ends at the reader's first key, tap or wheel, and not before: what fills in above it may come
 * long after the page (the drill items `serve` makes after printing its URL, a slow machine's first question).
 */
export function holdHashTarget() {
  let id = '';
  try { id = decodeURIComponent(location.hash.slice(1)); } catch { return; }
  const target = id && document.getElementById(id);
  if (!target) return;
  let held = null;
  const onScroll = () => { held = target.getBoundingClientRect().top; };
  const hold = new ResizeObserver(() => {
    if (held === null) return;  // not scrolled to it yet
    const moved = target.getBoundingClientRect().top - held;
    if (Math.abs(moved) >= 1) window.scrollBy(0, moved);
  });
  const inputs = ['keydown', 'pointerdown', 'touchstart', 'wheel'];
  const stop = () => {
    hold.disconnect();
    removeEventListener('scroll', onScroll);
    for (const kind of inputs) removeEventListener(kind, stop, true);
  };
  addEventListener('scroll', onScroll, { passive: true });
  for (const kind of inputs) addEventListener(kind, stop, { capture: true, passive: true });
  hold.observe(document.body);
}
