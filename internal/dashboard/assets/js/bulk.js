// Lists of conversions whose rows are selected and decided on at once (the conversions page,
// the fraud review): loading them page by page, the selection column, and a bulk decision.
import { api } from './api.js';
import { fmt, t } from './boot.js';
import { clearFieldErrors, flash, h, showError } from './ui.js';

// pager reads a list page by page into list.rows: load() starts again (and empties the
// selection), load(true) adds the next page; draw shows list.rows; a refused filter is marked
// on its field of form.
export function pager(path, query, form, selected, draw) {
  const list = { rows: [], cursor: '' };
  list.load = async (append = false) => {
    if (!append) { list.cursor = ''; list.rows = []; selected.clear(); }
    try {
      const page = await api.get(path, query(list.cursor));
      clearFieldErrors(form);
      list.rows = list.rows.concat(page.data);
      list.cursor = page.next_cursor;
      draw();
    } catch (err) {
      showError(err, form);
    }
  };
  return list;
}

// selectColumn is the checkbox of each conversion that can be selected; changed runs on a change.
export function selectColumn(selected, changed, selectable = () => true) {
  return { label: t('conversions.select'), render: (c) => (selectable(c)
    ? h('input', { type: 'checkbox', 'aria-label': t('conversions.select_one', { order: c.external_id }), checked: selected.has(c.id),
      onchange: (e) => { e.target.checked ? selected.add(c.id) : selected.delete(c.id); changed(); } })
    : '') };
}

// decide posts body to a bulk route (all or nothing), says done or, when some could not be
// decided, failed(n), and reloads; another refusal is shown on form. It reports success.
export async function decide(path, body, done, failed, form, reload) {
  try {
    await api.post(path, body);
    flash(done);
    await reload();
    return true;
  } catch (err) {
    const failures = err.problem && err.problem.failures;
    if (failures) {
      flash(failed(fmt.number(failures.length)), 'error');
    } else {
      showError(err, form);
    }
    return false;
  }
}
