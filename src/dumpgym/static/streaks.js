// Progress, kept in localStorage under one versioned key and nowhere else: current and best streak per
// drill kind, the path targets reached, one FSRS card per question (keyed by the item's `card`,
// schedule.js) and tallies of answers per drill kind, per skill and per primitive.
// A stored value this page cannot read is set aside under another key, never thrown away, never fatal;
// when even the copy cannot be saved, the value is left untouched and this page keeps progress in memory.
// Tabs share the key: each re-reads it before every change and merges (see `merge`), and follows the
// other tabs' saves through `storage` events, so no tab's save overwrites another's.

import { html, render } from './html.js';
import { answerShown, loadScheduler, nextCard, noteAnswer, ratingOf, skillOf } from './schedule.js';
import { repairRecord, scheduleSafely } from './progress-check.js';

export const KEY = 'dumpgym.progress/2';
// The first version (streaks and targets only): read once to migrate, never written, left as it was.
export const KEY_V1 = 'dumpgym.progress/1';
const KIND = /^[a-z0-9-]{1,40}$/;
// A target is CHAPTER/KIND/STREAK: a course chapter by its number (`02`), one of the gym's own by its name (`loops`).
const TARGET = /^[a-z0-9-]{1,40}\/[a-z0-9-]{1,40}\/[0-9]{1,4}$/;
const CELL = /^(all|(skill|primitive):[A-Za-z0-9_.-]{1,80})$/;
const FIELDS_V1 = new Set(['schema', 'streaks', 'reached', 'saved']);
const FIELDS = new Set([...FIELDS_V1, 'cards', 'tallies']);
const CARD_FIELDS = ['due', 'stability', 'difficulty', 'elapsed_days', 'scheduled_days', 'learning_steps',
  'reps', 'lapses', 'state', 'last_review'];

/** A fresh progress record. */
export function emptyProgress() {
  return { schema: KEY, streaks: {}, reached: {}, cards: {}, tallies: {} };
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;
const isAmount = (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isDate = (v) => typeof v === 'string' && v.length <= 40 && !Number.isNaN(Date.parse(v));

/** Why `card` is not an FSRS card as the record stores it, or ''. */
function cardProblem(card) {
  if (!isObject(card) || Object.keys(card).length !== CARD_FIELDS.length) return `has not exactly the fields ${CARD_FIELDS.join(', ')}`;
  for (const field of CARD_FIELDS) if (!Object.hasOwn(card, field)) return `has no ${field}`;
  if (!isDate(card.due) || !isDate(card.last_review)) return 'has a due or last_review that is not a date';
  if (!isAmount(card.stability) || !isAmount(card.difficulty) || !isAmount(card.elapsed_days) || !isAmount(card.scheduled_days)) {
    return 'has a stability, difficulty or day count that is not a number ≥ 0';
  }
  if (!isCount(card.learning_steps) || !isCount(card.reps) || !isCount(card.lapses)) return 'has a count that is not an integer ≥ 0';
  if (![0, 1, 2, 3].includes(card.state)) return 'has a state that is not 0–3';
  return '';
}

/** Why `value` is not a progress record, or '' when it is one (`v1`: of the first version). */
export function validate(value, { v1 = false } = {}) {
  const [key, fields] = v1 ? [KEY_V1, FIELDS_V1] : [KEY, FIELDS];
  if (!isObject(value)) return 'it is not a JSON object';
  if (value.schema !== key) return `its schema is ${JSON.stringify(value.schema ?? null)}, not "${key}"`;
  for (const field of Object.keys(value)) if (!fields.has(field)) return `it has an unknown field "${field}"`;
  if (!isObject(value.streaks) || !isObject(value.reached)) return 'streaks and reached must be objects';
  if (!v1 && (!isObject(value.cards) || !isObject(value.tallies))) return 'cards and tallies must be objects';
  for (const [kind, s] of Object.entries(value.streaks)) {
    if (!KIND.test(kind)) return `"${kind}" is not a drill kind`;
    if (!isObject(s) || !isCount(s.current) || !isCount(s.best) || s.current > s.best || Object.keys(s).length !== 2) {
      return `the streak for ${kind} is not {current, best} with current ≤ best`;
    }
  }
  for (const [target, when] of Object.entries(value.reached)) {
    if (!TARGET.test(target) || typeof when !== 'string' || when.length > 40) return `"${target}" is not a path target`;
  }
  if ('saved' in value && (typeof value.saved !== 'string' || value.saved.length > 40)) return 'saved must be a date';
  if (v1) return '';
  for (const [family, card] of Object.entries(value.cards)) {
    const parts = family.split('/');
    if (family.length > 600 || parts.length < 3 || !KIND.test(parts[0]) || /[\s\u0000-\u001f]/.test(family)) {
      return `"${family.slice(0, 80)}" is not a question family`;
    }
    const problem = cardProblem(card);
    if (problem) return `the card of ${family} ${problem}`;
  }
  for (const [kind, cells] of Object.entries(value.tallies)) {
    if (!KIND.test(kind) || !isObject(cells)) return `the tallies of "${kind}" are not a drill kind's`;
    for (const [cell, t] of Object.entries(cells)) {
      if (!CELL.test(cell)) return `"${cell}" is not a tally (all, skill:NAME or primitive:NAME)`;
      if (!isObject(t) || !isCount(t.attempts) || !isCount(t.correct) || t.correct > t.attempts || Object.keys(t).length !== 2) {
        return `the tally ${kind} ${cell} is not {attempts, correct} with correct ≤ attempts`;
      }
    }
  }
  return '';
}

/**
 * A card's key as this version names it, from a key saved before cards were the items' own
 * (`dumpgym.drills/1`, whose page made families of drill/program/about/step): a family with no `about`
 * (`layouts/scan-layers//bytes`, one card for 38 buffers' questions) named several questions and starts
 * fresh (null); a trailing empty step is dropped (`shapes/mlp/3/` is `shapes/mlp/3`); any other key, and
 * every key this version writes, is kept as it is (a family whose kind kept its questions is the card).
 */
export function currentCard(key) {
  const parts = key.split('/');
  if (parts[2] === '') return null;
  return parts.length > 3 && parts[parts.length - 1] === '' ? parts.slice(0, -1).join('/') : key;
}

/** A record with every card under its current key (`currentCard`); itself when nothing changes. */
export function withCurrentCards(record) {
  const keys = Object.keys(record.cards);
  if (keys.every((key) => currentCard(key) === key)) return record;
  const cards = {};
  for (const key of keys) {
    const now = currentCard(key);
    const card = record.cards[key];
    if (now !== null && (!Object.hasOwn(cards, now) || Date.parse(card.last_review) > Date.parse(cards[now].last_review))) {
      cards[now] = card;
    }
  }
  return { ...record, cards };
}

/** A first-version record as a current one: every streak, best and target kept, no cards or tallies yet. */
export function migrate(v1) {
  return { ...emptyProgress(), streaks: structuredClone(v1.streaks), reached: structuredClone(v1.reached),
    ...(v1.saved === undefined ? {} : { saved: v1.saved }) };
}

function memoryStorage() {
  const map = new Map();
  return {
    getItem: (k) => (map.has(k) ? map.get(k) : null),
    setItem: (k, v) => map.set(k, String(v)),
    removeItem: (k) => map.delete(k),
  };
}

const own = (record, key) => (Object.hasOwn(record, key) ? record[key] : undefined);

/** Whether record `a` holds all that `b` does: every best at least as high, every target reached, every card, every tally as high. */
function covers(a, b) {
  return Object.entries(b.streaks).every(([kind, s]) => (own(a.streaks, kind)?.best ?? 0) >= s.best) &&
    Object.keys(b.reached).every((target) => Object.hasOwn(a.reached, target)) &&
    Object.keys(b.cards).every((family) => Object.hasOwn(a.cards, family)) &&
    Object.entries(b.tallies).every(([kind, cells]) => Object.entries(cells).every(([cell, t]) =>
      (own(own(a.tallies, kind) ?? {}, cell)?.attempts ?? 0) >= t.attempts));
}

/**
 * Two tabs' records as one: each best is the higher, each target reached at the earlier time.
 * A current streak comes from the record saved later (the tab the learner answered in last), or from
 * the other when that one never saw the kind. A card comes from the record that reviewed it later (its
 * `last_review`); a tally cell is the one with more attempts (tabs add to the same counts, so the larger
 * holds the other, and an answer is never counted twice). A field added to the record needs its rule here.
 */
function merge(mine, theirs) {
  const theirsNewer = (theirs.saved ?? '') > (mine.saved ?? '');
  const [older, newer] = theirsNewer ? [mine, theirs] : [theirs, mine];
  const streaks = {};
  for (const kind of new Set([...Object.keys(older.streaks), ...Object.keys(newer.streaks)])) {
    const [o, n] = [own(older.streaks, kind), own(newer.streaks, kind)];
    streaks[kind] = { current: (n ?? o).current, best: Math.max(o?.best ?? 0, n?.best ?? 0) };
  }
  const reached = { ...older.reached };
  for (const [target, when] of Object.entries(newer.reached)) {
    if (!Object.hasOwn(reached, target) || when < reached[target]) reached[target] = when;
  }
  const cards = { ...older.cards };
  for (const [family, card] of Object.entries(newer.cards)) {
    if (!Object.hasOwn(cards, family) || Date.parse(card.last_review) >= Date.parse(cards[family].last_review)) cards[family] = card;
  }
  const tallies = structuredClone(older.tallies);
  for (const [kind, cells] of Object.entries(newer.tallies)) {
    tallies[kind] = own(tallies, kind) ?? {};
    for (const [cell, t] of Object.entries(cells)) {
      if (!Object.hasOwn(tallies[kind], cell) || t.attempts >= tallies[kind][cell].attempts) tallies[kind][cell] = { ...t };
    }
  }
  const saved = newer.saved ?? older.saved;
  return { schema: KEY, streaks, reached, cards, tallies, ...(saved === undefined ? {} : { saved }) };
}

/** Why a save failed, in the learner's words. */
function refusal(error) {
  if (error?.name === 'QuotaExceededError') return 'the browser\'s storage for this site is full';
  if (error?.name === 'SecurityError') return 'the browser refuses to store it here';
  return `the browser refused it (${error?.name || error})`;
}

/**
 * The progress store: change it through its methods, listen for 'change' (also sent when another tab's
 * save is merged in) and for 'notice' ({message, tone, sticky, key}: storage trouble after loading).
 */
export class Progress extends EventTarget {
  #loading = true; // notices wait in `notices` until the page can listen
  #raw = null; // the text under KEY when this tab last read or wrote it
  #base = null; // that text as a record, when it was one
  #held = false; // an unreadable record is under KEY and could not be copied aside: never save over it
  #failing = false; // the last save failed and the learner was told

  constructor(storage) {
    super();
    /** Notices from loading, made before anyone could listen. */
    this.notices = [];
    try {
      this.storage = storage ?? window.localStorage;
      this.storage.getItem(KEY);
    } catch {
      this.storage = memoryStorage();
      this.#notice('This browser refuses local storage here, so progress will last only until you leave the page.');
    }
    this.data = emptyProgress();
    this.#load();
    this.#loading = false;
    window.addEventListener('storage', (e) => {
      if (e.storageArea !== this.storage || (e.key !== KEY && e.key !== null)) return;
      if (this.#refresh()) this.dispatchEvent(new CustomEvent('change', { detail: { merged: true } }));
    });
  }

  #notice(message, { tone = 'bad', sticky = true, key = '' } = {}) {
    const notice = { message, tone, sticky, key };
    if (this.#loading) this.notices.push(notice);
    else this.dispatchEvent(new CustomEvent('notice', { detail: notice }));
  }

  #read() {
    let raw = null;
    try { raw = this.storage.getItem(KEY); } catch { /* unreadable now: as if empty */ }
    if (raw === null) return { raw };
    try {
      const value = JSON.parse(raw);
      return { raw, value, problem: validate(value) };
    } catch {
      return { raw, problem: 'it is not valid JSON' };
    }
  }

  #load() {
    const { raw, value, problem } = this.#read();
    if (raw === null) { this.#migrate(); return; }
    if (problem) { this.#unreadable(raw, problem); return; }
    this.data = withCurrentCards(structuredClone(value));
    [this.#raw, this.#base] = [raw, value];
    this.#repair();
  }

  // Cards the scheduler cannot take, and undated targets (progress-check.js): set aside with a notice, saved.
  #repair() {
    const repaired = repairRecord(this.data, { storage: this.storage });
    if (repaired) { this.#notice(repaired); this.#save(); }
  }

  // A first-version record and no current one: carry it over whole and save it under KEY. The old key is
  // left as it was (a page of the old version still reads it); one that cannot be read is left alone too.
  #migrate() {
    let raw = null;
    try { raw = this.storage.getItem(KEY_V1); } catch { /* unreadable: nothing to migrate */ }
    if (raw === null) return;
    let problem;
    try {
      const value = JSON.parse(raw);
      problem = validate(value, { v1: true });
      if (!problem) { this.data = migrate(value); this.#save(); return; }
    } catch {
      problem = 'it is not valid JSON';
    }
    this.#notice(`Progress saved by an older version could not be read (${problem}). It was left under the key “${KEY_V1}” and a fresh record started.`);
  }

  // Take in what other tabs saved since this tab last read or wrote the key; true when the record changed.
  #refresh() {
    const { raw, value, problem } = this.#read();
    if (raw === this.#raw) return false;
    if (raw === null) { this.#raw = null; return false; } // removed elsewhere: the next save writes ours back
    if (problem) { this.#unreadable(raw, problem); return false; }
    const before = JSON.stringify(this.data);
    // Bests and targets only grow, except by a reset or an import: a stored record that lacks some of
    // what this tab last saw was replaced in another tab on purpose, so it is taken whole.
    const theirs = withCurrentCards(value);  // a tab of the previous version may have saved old keys
    this.data = this.#base && !covers(theirs, withCurrentCards(this.#base)) ? structuredClone(theirs) : merge(this.data, theirs);
    [this.#raw, this.#base, this.#held] = [raw, value, false];
    this.#repair();  // another tab (an older page) may have saved what the scheduler cannot take
    return JSON.stringify(this.data) !== before;
  }

  // Copy an unreadable stored value aside, then take the key over; when the copy cannot be saved,
  // leave the value untouched and keep this page's progress in memory until a reset or an import.
  #unreadable(raw, problem) {
    const aside = `${KEY}:set-aside:${new Date().toISOString()}`;
    let kept = false;
    try {
      this.storage.setItem(aside, raw);
      kept = this.storage.getItem(aside) === raw;
      if (!kept) this.storage.removeItem(aside);
    } catch { /* full or refused: kept stays false */ }
    // Either way this text is dealt with: later reads skip it until something else is saved over it.
    [this.#raw, this.#base] = [raw, null];
    if (kept) {
      this.#notice(`Saved progress could not be read (${problem}). It was kept under the key “${aside}” and a fresh record started.`);
      this.#save();
      return;
    }
    this.#held = true;
    this.#notice(`Saved progress could not be read (${problem}), and there was no room to copy it aside, ` +
      `so it was left as it is under “${KEY}”. Progress on this page is not saved, so as not to overwrite it, ` +
      'until you reset or import progress.');
  }

  #save() {
    if (this.#held) return;
    const raw = JSON.stringify(this.data);
    try {
      this.storage.setItem(KEY, raw);
    } catch (e) {
      if (!this.#failing) {
        this.#failing = true;
        this.#notice(`Progress is not being saved: ${refusal(e)}. It lasts until you leave this page; export it to keep it.`,
          { key: 'progress-save' });
      }
      return;
    }
    [this.#raw, this.#base] = [raw, JSON.parse(raw)];
    if (this.#failing) {
      this.#failing = false;
      this.#notice('Progress is being saved again.', { tone: 'good', sticky: false, key: 'progress-save' });
    }
  }

  // Every change: merge other tabs' saves first, so the change applies to the whole record, then save.
  #update(change, detail) {
    this.#refresh();
    change();
    this.data.saved = new Date().toISOString();
    this.#save();
    this.dispatchEvent(new CustomEvent('change', { detail }));
  }

  /** {current, best} for a drill kind. */
  streak(kind) {
    return own(this.data.streaks, kind) ?? { current: 0, best: 0 };
  }

  // `counts` false: a right answer that is no reading (its answer was shown this run) leaves the streak be.
  #count(kind, right, counts = true) {
    if (right && !counts) return;
    const s = { ...this.streak(kind) };
    s.current = right ? s.current + 1 : 0;
    s.best = Math.max(s.best, s.current);
    this.data.streaks[kind] = s;
  }

  /** Count one answer: a right one extends the streak, a wrong one ends it. */
  record(kind, right) {
    this.#update(() => this.#count(kind, right), { kind, right });
  }

  /**
   * One answer to a drill item, `ms` after it was shown: the streak as `record` counts it (except that a
   * right answer to a card whose answer was shown earlier in this run leaves it as it is), the family's
   * FSRS card rated from correctness and time (schedule.js), so is the card of the due question it was
   * asked in place of (`standsFor`, a sibling's), and the tallies of the kind, the item's skill and its
   * primitive. Resolves, once recorded, to {counted}: whether it moved the streak (the first answer waits
   * for ts-fsrs to load).
   */
  async review(item, right, ms, { standsFor = null } = {}) {
    const kind = item.drill;
    const family = item.card;
    const rating = ratingOf(right, ms);
    const counts = !answerShown(family);
    noteAnswer(item, standsFor);
    await loadScheduler();
    const rate = (card) => scheduleSafely(nextCard, own(this.data.cards, card), rating, card,
      (message) => this.#notice(message, { sticky: false, key: 'scheduler' }));  // progress-check.js
    this.#update(() => {
      this.#count(kind, right, counts);
      this.data.cards[family] = rate(family);
      if (standsFor && standsFor !== family) this.data.cards[standsFor] = rate(standsFor);
      const cells = (this.data.tallies[kind] = own(this.data.tallies, kind) ?? {});
      const skill = skillOf(item);  // shapes' skill, the step of the others (decisions: its kind)
      const names = ['all', skill && `skill:${skill}`, item.primitive && `primitive:${item.primitive}`];
      for (const cell of names.filter((c) => c && CELL.test(c))) {
        const t = own(cells, cell) ?? { attempts: 0, correct: 0 };
        cells[cell] = { attempts: t.attempts + 1, correct: t.correct + (right ? 1 : 0) };
      }
    }, { kind, right, family, rating });
    return { counted: !right || counts };
  }

  /** The FSRS cards by family (read them, never change them). */
  cards() {
    return this.data.cards;
  }

  /** The tallies ({KIND: {CELL: {attempts, correct}}}) and, per family, its card's FSRS stability in days. */
  stats() {
    const stability = {};
    for (const [family, card] of Object.entries(this.data.cards)) stability[family] = card.stability;
    return { tallies: structuredClone(this.data.tallies), stability };
  }

  /** Whether a path target has been reached. */
  reached(target) {
    return Object.hasOwn(this.data.reached, target);
  }

  /** Record a path target as reached (once). */
  markReached(target) {
    if (this.reached(target)) return;
    this.#update(() => { this.data.reached[target] ??= new Date().toISOString(); }, { reached: target });
  }

  /** Forget every streak and target (and save over a record that could not be read). */
  reset() {
    this.#update(() => { this.#held = false; this.data = emptyProgress(); }, { reset: true });
  }

  /** The record as the text of a JSON file. */
  exportText() {
    return JSON.stringify({ ...this.data, saved: new Date().toISOString() }, null, 1) + '\n';
  }

  /**
   * Read an exported file (of either version) without changing anything: {record, counts}, where counts
   * says for streaks, targets and cards how many there are now and how many after an import. Throws an
   * Error saying what is wrong with the file.
   */
  readImport(text) {
    let value;
    try { value = JSON.parse(text); } catch { throw new Error('the file is not JSON'); }
    const v1 = isObject(value) && value.schema === KEY_V1;
    const problem = validate(value, { v1 });
    if (problem) throw new Error(`the file is not dumpgym progress: ${problem}`);
    const record = v1 ? migrate(value) : withCurrentCards(value);
    const repaired = repairRecord(record, { what: 'The file' });  // progress-check.js
    if (repaired) this.#notice(repaired, { key: 'progress-import-repair' });
    const count = (r) => ({ streaks: Object.keys(r.streaks).length, targets: Object.keys(r.reached).length,
      cards: Object.keys(r.cards).length });
    this.#refresh();
    return { record, counts: { before: count(this.data), after: count(record) } };
  }

  /** Replace the record with one `readImport` returned. */
  importRecord(record) {
    this.#update(() => {
      this.#held = false;
      this.data = { schema: KEY, streaks: structuredClone(record.streaks), reached: structuredClone(record.reached),
        cards: structuredClone(record.cards), tallies: structuredClone(record.tallies) };
    }, { imported: true });
  }

  /** Replace the record with an exported one; throws an Error saying what is wrong with it. */
  importText(text) {
    this.importRecord(this.readImport(text).record);
  }
}

/** Wire the export, import and reset buttons. */
export function registerProgressTools(root, progress, notify) {
  const file = root.querySelector('[data-progress-file]');
  const reset = root.querySelector('[data-progress-reset]');
  root.querySelector('[data-progress-export]').addEventListener('click', () => {
    const blob = new Blob([progress.exportText()], { type: 'application/json' });
    const link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = `dumpgym-progress-${new Date().toISOString().slice(0, 10)}.json`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  });
  root.querySelector('[data-progress-import]').addEventListener('click', () => file.click());
  file.addEventListener('change', async () => {
    const chosen = file.files[0];
    file.value = '';
    if (!chosen) return;
    if (chosen.size > 1e6) { notify('That file is too large to be dumpgym progress.', { tone: 'bad' }); return; }
    let read;
    try {
      read = progress.readImport(await chosen.text());
    } catch (e) {
      notify(`Nothing imported: ${e.message}.`, { tone: 'bad', sticky: true, key: 'progress-import' });
      return;
    }
    // Ask first, in the page (never window.confirm), saying what the import would change.
    const { before, after } = read.counts;
    const change = (what) => `${what} ${before[what]} → ${after[what]}`;
    const box = notify(`Replace your progress with ${chosen.name}? ${['streaks', 'targets', 'cards'].map(change).join(', ')}.`,
      { sticky: true, key: 'progress-import' });
    box.dataset.importConfirm = '';
    const row = document.createElement('p');
    render(row, html`<button type="button" data-import-replace>replace my progress</button> <button type="button" data-import-cancel>keep mine</button>`);
    box.append(row);
    row.querySelector('[data-import-cancel]').addEventListener('click', () => {
      box.remove();
      notify('Nothing imported: your progress is as it was.');
    });
    row.querySelector('[data-import-replace]').addEventListener('click', () => {
      box.remove();
      progress.importRecord(read.record);
      notify(`Progress imported from ${chosen.name}.`, { tone: 'good' });
    });
    row.querySelector('[data-import-replace]').focus();
  });
  let armed = null;
  reset.addEventListener('click', () => {
    if (!armed) {
      reset.textContent = 'reset: sure?';
      reset.classList.add('armed');
      armed = setTimeout(() => { armed = null; reset.textContent = 'reset'; reset.classList.remove('armed'); }, 4000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    reset.textContent = 'reset';
    reset.classList.remove('armed');
    progress.reset();
    notify('Progress reset: every streak, target and card starts from zero.');
  });
}
