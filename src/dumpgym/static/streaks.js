// Progress, kept in localStorage under one versioned key and nowhere else:
// current and best streak per drill kind, and the path targets reached.
// A stored value this page cannot read is set aside under another key, never thrown away, never fatal;
// when even the copy cannot be saved, the value is left untouched and this page keeps progress in memory.
// Tabs share the key: each re-reads it before every change and merges (see `merge`), and follows the
// other tabs' saves through `storage` events, so no tab's save overwrites another's.

export const KEY = 'dumpgym.progress/1';
const KIND = /^[a-z0-9-]{1,40}$/;
const TARGET = /^[0-9]{2}\/[a-z0-9-]{1,40}\/[0-9]{1,4}$/;
const FIELDS = new Set(['schema', 'streaks', 'reached', 'saved']);

/** A fresh progress record. */
export function emptyProgress() {
  return { schema: KEY, streaks: {}, reached: {} };
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;

/** Why `value` is not a progress record, or '' when it is one. */
export function validate(value) {
  if (!isObject(value)) return 'it is not a JSON object';
  if (value.schema !== KEY) return `its schema is ${JSON.stringify(value.schema ?? null)}, not "${KEY}"`;
  for (const field of Object.keys(value)) if (!FIELDS.has(field)) return `it has an unknown field "${field}"`;
  if (!isObject(value.streaks) || !isObject(value.reached)) return 'streaks and reached must be objects';
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
  return '';
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

/** Whether record `a` holds all that `b` does: every best at least as high, every target reached. */
function covers(a, b) {
  return Object.entries(b.streaks).every(([kind, s]) => (own(a.streaks, kind)?.best ?? 0) >= s.best) &&
    Object.keys(b.reached).every((target) => Object.hasOwn(a.reached, target));
}

/**
 * Two tabs' records as one: each best is the higher, each target reached at the earlier time.
 * A current streak comes from the record saved later (the tab the learner answered in last), or from
 * the other when that one never saw the kind. A field added to the record needs its rule here.
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
  const saved = newer.saved ?? older.saved;
  return { schema: KEY, streaks, reached, ...(saved === undefined ? {} : { saved }) };
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
    if (raw === null) return;
    if (problem) { this.#unreadable(raw, problem); return; }
    this.data = structuredClone(value);
    [this.#raw, this.#base] = [raw, value];
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
    this.data = this.#base && !covers(value, this.#base) ? structuredClone(value) : merge(this.data, value);
    [this.#raw, this.#base, this.#held] = [raw, value, false];
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

  /** Count one answer: a right one extends the streak, a wrong one ends it. */
  record(kind, right) {
    this.#update(() => {
      const s = { ...this.streak(kind) };
      s.current = right ? s.current + 1 : 0;
      s.best = Math.max(s.best, s.current);
      this.data.streaks[kind] = s;
    }, { kind, right });
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

  /** Replace the record with an exported one; throws an Error saying what is wrong with it. */
  importText(text) {
    let value;
    try { value = JSON.parse(text); } catch { throw new Error('the file is not JSON'); }
    const problem = validate(value);
    if (problem) throw new Error(`the file is not dumpgym progress: ${problem}`);
    this.#update(() => {
      this.#held = false;
      this.data = { schema: KEY, streaks: value.streaks, reached: value.reached };
    }, { imported: true });
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
    try {
      progress.importText(await chosen.text());
      notify(`Progress imported from ${chosen.name}.`, { tone: 'good' });
    } catch (e) {
      notify(`Nothing imported: ${e.message}.`, { tone: 'bad', sticky: true });
    }
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
    notify('Progress reset: every streak and target starts from zero.');
  });
}
