// The one tab behaviour of the page (the drill tabs, each corpus program's layer tabs): a row of
// role=tab elements with a roving tabindex, moved along by ArrowLeft/ArrowRight (wrapping), Home and End.

/** Mark `chosen` as the selected tab of `tabs` (the others leave the tab order); focus it if asked. */
export function selectTab(tabs, chosen, focus = false) {
  for (const tab of tabs) {
    const on = tab === chosen;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
    if (on && focus) tab.focus();
  }
}

/** The tab a key moves to from `tabs[i]`, or null if the key is not one that moves along tabs. */
export function tabForKey(key, tabs, i) {
  const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[key];
  return to === undefined ? null : tabs[(to + tabs.length) % tabs.length];
}

/** On a moving key inside `container`, call `choose(tab)` with the tab to move to; `current(event)`
 * gives the row of tabs and the index moved from, or null when the event is not about tabs. */
export function onTabKeys(container, current, choose) {
  container.addEventListener('keydown', (e) => {
    const at = current(e);
    const tab = at && tabForKey(e.key, at.tabs, at.i);
    if (!tab) return;
    e.preventDefault();
    choose(tab);
  });
}
