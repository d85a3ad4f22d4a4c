// Spaced repetition: which question comes next, and how an answer moves its card.
// Memory is FSRS (the vendored ts-fsrs): one card per question, named by the item itself (`item.card`:
// what makes two items the same question is each kind's decision, made in Python; the decoder's card,
// for one, is the same whatever layer spells the dot). The record keys cards by it ("families" below).
// ts-fsrs is loaded on the learner's first touch of a drill, not with the page: until an answer is rated,
// the record's cards (plain dates and numbers) are all the page needs.
import { pickWeighted, weightOf } from './sample.js';

/** ts-fsrs's ratings and card states, by value (the record stores the numbers); a browser test checks them against ts-fsrs. */
export const Rating = Object.freeze({ Again: 1, Hard: 2, Good: 3, Easy: 4 });
export const State = Object.freeze({ New: 0, Learning: 1, Review: 2, Relearning: 3 });

/** What an item drills, as the mastery map counts it: its `skill` (shapes), else its `step` (a decision's kind, a decoder question). */
export function skillOf(item) {
  return item?.skill ?? item?.step ?? null;
}

// An answer's grade from its correctness and time. Reading a dump takes a few seconds even when known:
// under FAST_MS is recall without effort (Easy); over SLOW_MS the learner worked it out (Hard).
export const FAST_MS = 8000;
export const SLOW_MS = 30000;

/** The FSRS rating of an answer: wrong → Again; right over SLOW_MS → Hard; under FAST_MS → Easy; else Good. */
export function ratingOf(right, ms) {
  if (!right) return Rating.Again;
  if (ms > SLOW_MS) return Rating.Hard;
  if (ms < FAST_MS) return Rating.Easy;
  return Rating.Good;
}

let loading = null;
let fsrs = null; // {createEmptyCard, scheduler} once loaded

/** Load ts-fsrs (once); resolves when `nextCard` can run. No fuzz: the same answers give the same schedule. */
export function loadScheduler() {
  loading ??= import('./vendor/ts-fsrs.js').then((m) => {
    fsrs = { createEmptyCard: m.createEmptyCard, scheduler: m.fsrs({ enable_fuzz: false }) };
  });
  return loading;
}

/** A family's card after one more answer, dates as ISO strings (as the progress record stores them); after `loadScheduler`. */
export function nextCard(card, rating, now = new Date()) {
  if (!fsrs) throw new Error('nextCard before loadScheduler()');
  const { card: next } = fsrs.scheduler.next(card ?? fsrs.createEmptyCard(now), now, rating);
  return {
    due: next.due.toISOString(), stability: next.stability, difficulty: next.difficulty,
    elapsed_days: next.elapsed_days, scheduled_days: next.scheduled_days, learning_steps: next.learning_steps,
    reps: next.reps, lapses: next.lapses, state: next.state, last_review: next.last_review.toISOString(),
  };
}

// Within a session. FSRS's (re)learning steps are minutes (Again: 1 min, then 10), longer than a quick
// run of questions and shorter than a learner's attention: a card in (re)learning whose due time is
// within SESSION_WINDOW_MS counts as due once GAP other questions of its drill were asked since its
// last answer, or when its time comes, whichever is first. So a wrong answer comes back after GAP
// questions, and due cards go first, so it is asked again within the next ten.
export const GAP = 3;
export const SESSION_WINDOW_MS = 20 * 60 * 1000;
const asked = new Map(); // kind -> questions answered in this page
const answeredAt = new Map(); // family -> the kind's question count when it was last answered

/** Note an answer in this page's session (the record holds the card; this, the question count): to
 *  `item`'s card, and to the card of a due question it was asked in place of (`standsFor`). */
export function noteAnswer(item, standsFor = null) {
  const n = (asked.get(item.drill) ?? 0) + 1;
  asked.set(item.drill, n);
  answeredAt.set(item.card, n);
  if (standsFor) answeredAt.set(standsFor, n);
}

/** Whether a card's answer was shown earlier in this run (this page): every answer shows the right one,
 *  so a card answered once is one whose answer the learner has seen. Its next right answer is no reading. */
export function answerShown(card) {
  return answeredAt.has(card);
}

const learning = (card) => card.state === State.Learning || card.state === State.Relearning;

/** Whether a family's card is due now: its time has come, or it is relearning and GAP questions have passed. */
export function isDue(family, card, now = Date.now()) {
  const due = Date.parse(card.due);
  if (due <= now) return true;
  if (!learning(card) || due - now > SESSION_WINDOW_MS || !answeredAt.has(family)) return false;
  const kind = family.slice(0, family.indexOf('/'));
  return (asked.get(kind) ?? 0) - answeredAt.get(family) >= GAP;
}

/** The due families of a drill kind, (re)learning ones first, then the longest overdue. */
export function dueFamilies(cards, kind, now = Date.now()) {
  return Object.entries(cards)
    .filter(([family, card]) => family.startsWith(`${kind}/`) && isDue(family, card, now))
    .sort(([, a], [, b]) => (learning(b) - learning(a)) || (Date.parse(a.due) - Date.parse(b.due)))
    .map(([family]) => family);
}

// No program gives more than a fifth of a drill's questions, however many items it has: one big train
// step added beside the built-in corpus would otherwise be most of what the learner sees.
export const MAX_SHARE = 1 / 5;

/**
 * Programs' masses with the largest lowered (never raised) so that none holds more than `limit` of the
 * sum: the smallest cut that does it, found by filling from the top. Fewer than 1/limit programs with
 * mass cannot all stay under it: they get equal masses.
 */
export function capShares(masses, limit = MAX_SHARE) {
  const live = masses.filter((m) => m > 0).sort((a, b) => b - a);
  if (!live.length) return [...masses];
  if (live.length * limit <= 1) return masses.map((m) => (m > 0 ? 1 : 0));
  let rest = live.reduce((a, m) => a + m, 0);
  for (let k = 0; k < live.length; k++) {
    // With the k largest cut to `cap`, the cap is `limit` of the new sum: cap = limit * (k * cap + rest).
    const cap = (limit * rest) / (1 - limit * k);
    if (live[k] <= cap) return k === 0 ? [...masses] : masses.map((m) => Math.min(m, cap));
    rest -= live[k];
  }
  return [...masses];  // unreachable: the smallest program always fits under its cap
}

// When both due and new items wait, every NEW_EVERY-th question is a new one: one new per two due.
const NEW_EVERY = 3;
const turns = new Map(); // kind -> questions picked in this page

/** A program's base in `pool`: the program it is a variant of (`base`, from `data-pool`), else itself.
 *  A program and its variants (`mlp`, `mlp-2`, `mlp-f32`) share one base. */
function baseOf(pool, slug) {
  return pool.find((p) => p.slug === slug)?.base ?? slug;
}

/**
 * The next question of a drill kind: {slug, index, weight, split, reason, base}, reason 'due' (a card whose
 * time has come), 'new' (a card never answered, drawn by weight) or 'ahead' (nothing due, nothing new: any
 * item by weight); null when no item has weight. A program is drawn by its summed weight, capped so that none
 * has more than MAX_SHARE of the draw (`capShares`). Never two questions in a row from one program and its
 * variants (one `base`) while a program of another base has weight: the whole order (due, new, ahead) is
 * tried without the last base first, and with it only when nothing else is left (a focus, a drill of one
 * family). So a due card of the last base waits one question, unless a sibling from elsewhere stands in.
 * `pool` is the panel's [{slug, base}], `masses` each program's summed weight, `last` the item just asked
 * ({slug, index, weight, family, base}), `split(slug)` fetches a program's items, `weight(item)` an item's
 * weight (weightOf, or 0 outside a focus the panel has).
 */
export async function pickNext({ kind, pool, masses, last, cards, split, weight = weightOf, random = Math.random }) {
  const turn = turns.get(kind) ?? 0;
  turns.set(kind, turn + 1);
  const due = dueFamilies(cards, kind).filter((f) => !last || f !== last.family);
  const preferNew = !due.length || turn % NEW_EVERY === NEW_EVERY - 1;
  const order = preferNew ? [pickNew, pickDue, pickAny] : [pickDue, pickNew, pickAny];
  const lastBase = last ? last.base ?? baseOf(pool, last.slug) : null;
  for (const avoid of lastBase === null ? [null] : [lastBase, null]) {
    // `open(slug)`: whether a program may give this question (not of the base just asked, on the first pass).
    const open = (slug) => avoid === null || baseOf(pool, slug) !== avoid;
    for (const how of order) {
      const picked = await how({ kind, pool, masses, last, cards, split, weight, random, due, open });
      if (picked) return { ...picked, base: baseOf(pool, picked.slug) };
    }
  }
  return null;
}

const choice = (slug, index, s, reason, weight) => ({ slug, index, weight: weight(s.items[index]), split: s, reason });

// A due question is asked anew, never verbatim: when the learner has seen its answer (this run, or it is
// still being learnt after a miss), a sibling is asked in its place (`pickSibling`), and the answer to
// the sibling rates the due card too (`standsFor`); without a sibling, the panel re-spells it
// (`optionOrder`: a choice's options in an order not shown before).
// A due card of a program that is not `open` (the base just asked) is asked only through a sibling of
// an open program; else it waits for the next question.
async function pickDue({ pool, last, cards, split, weight, random, due, open }) {
  const slugs = new Set(pool.map((p) => p.slug));
  for (const family of due) {
    const slug = family.split('/')[1];
    if (!slugs.has(slug)) continue; // a program no longer in the gym
    const s = await split(slug);
    const weights = s.items.map((item) => (item.card === family ? weight(item) : 0));
    const index = pickWeighted(weights, last && last.slug === slug ? last.index : -1, random);
    if (index < 0) continue;
    if (answerShown(family) || learning(cards[family])) {
      const sibling = await pickSibling({ of: s.items[index], slug, pool, last, split, weight, random, open });
      if (sibling) return { ...sibling, standsFor: family };
    }
    if (open(slug)) return choice(slug, index, s, 'due', weight);
  }
  return null;
}

/** Whether two items are siblings: the same kind and skill (`skillOf`), another question (`card`). */
export function isSibling(a, b) {
  const skill = skillOf(a);
  return skill !== null && a.drill === b.drill && skillOf(b) === skill && a.card !== b.card;
}

/**
 * A sibling of item `of` (of program `slug`) whose answer was not shown this run, by weight: from the same
 * program if it has one, else from another program of the pool (in random order), of `open` programs
 * only; null when none has.
 */
async function pickSibling({ of, slug, pool, last, split, weight, random, open }) {
  const others = pool.map((p) => p.slug).filter((s) => s !== slug);
  for (let i = others.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [others[i], others[j]] = [others[j], others[i]];
  }
  for (const from of [slug, ...others].filter(open)) {
    const s = await split(from);
    const weights = s.items.map((item, i) => (isSibling(of, item) && !answerShown(item.card) &&
      !(last && last.slug === from && last.index === i) ? weight(item) : 0));
    const index = pickWeighted(weights, -1, random);
    if (index >= 0) return choice(from, index, s, 'due', weight);
  }
  return null;
}

const orders = new Map(); // card -> the option orders shown for it in this run, as 'i,j,k'

/**
 * The order to show a choice's `n` options in, as pool indices: the pool's own the first time a card is
 * asked; a card asked before (`askedBefore`: it has a record) gets an order not shown yet in this run
 * nor the pool's (or, once every order has been shown, one unlike the last).
 */
export function optionOrder(card, n, askedBefore, random = Math.random) {
  const pool = [...Array(n).keys()];
  const shown = orders.get(card) ?? (askedBefore ? [pool.join(',')] : []);
  orders.set(card, shown);
  let order = pool;
  if (shown.length && n > 1) {
    const last = shown[shown.length - 1];
    for (let tries = 0; tries < 50; tries++) {
      order = [...pool];
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [order[i], order[j]] = [order[j], order[i]];
      }
      if (!shown.includes(order.join(',')) || (tries >= 40 && order.join(',') !== last)) break;
    }
    if (order.join(',') === last) {
      const before = last.split(',').map(Number);
      order = [...before.slice(1), before[0]];  // the last order turned by one: unlike it in every place
    }
  }
  shown.push(order.join(','));
  return order;
}

async function pickNew({ pool, masses, last, cards, split, weight, random, open }) {
  // Capped over the whole pool, then the closed programs taken out: the cap is a program's share of the drill.
  const left = capShares(masses).map((m, p) => (open(pool[p].slug) ? m : 0));
  for (let tries = 0; tries < pool.length; tries++) {
    const p = pickWeighted(left, -1, random);
    if (p < 0) return null;
    const slug = pool[p].slug;
    const s = await split(slug);
    const weights = s.items.map((item, i) =>
      (Object.hasOwn(cards, item.card) || (last && last.slug === slug && last.index === i) ? 0 : weight(item)));
    const index = pickWeighted(weights, -1, random);
    if (index >= 0) return choice(slug, index, s, 'new', weight);
    left[p] = 0;
  }
  return null;
}

// Any item of an open program by weight, never the one just asked unless no other has weight (and
// then only when every program is open: the last pass).
async function pickAny({ pool, masses, last, split, weight, random, open }) {
  // (What rounding leaves of a sum less its only weighted item counts as nothing.)
  const rest = masses.map((w, i) => {
    const r = last && pool[i].slug === last.slug ? w - last.weight : w;
    return r > 1e-9 * w ? r : 0;
  });
  const p = pickWeighted(capShares(rest).map((m, i) => (open(pool[i].slug) ? m : 0)), -1, random);
  if (p < 0) return last && open(last.slug) ? { ...last, split: await split(last.slug), reason: 'ahead' } : null;
  const slug = pool[p].slug;
  const s = await split(slug);
  const skip = last && last.slug === slug ? last.index : -1;
  // An item whose answer this run has shown only when the program has no other.
  const unseen = pickWeighted(s.items.map((item) => (answerShown(item.card) ? 0 : weight(item))), skip, random);
  const index = unseen >= 0 && unseen !== skip ? unseen : pickWeighted(s.items.map(weight), skip, random);
  return index < 0 ? null : choice(slug, index, s, 'ahead', weight);
}

/** How many cards of each drill kind are due now, shown in each panel's `[data-due-count]`. */
export function showDueCounts(root, progress) {
  const cards = progress.cards();
  for (const el of root.querySelectorAll('section[data-drill]')) {
    const count = el.querySelector('[data-due-count]');
    if (count) count.textContent = dueFamilies(cards, el.dataset.drill).length;
  }
}

/** Keep the "due now" counts current: on every change of the record and once a minute (cards fall due with time). */
export function registerDueCounts(root, progress) {
  const update = () => showDueCounts(root, progress);
  progress.addEventListener('change', update);
  setInterval(update, 60 * 1000);
  update();
}
