// Exchange rates the advertiser keeps: set one, upload a CSV (all or nothing), list them.
import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { busy, clearFlash, flash, h, localeAmount, showError, table } from '../ui.js';

const canWrite = boot.role !== 'member';
const setForm = document.getElementById('rate-form');
const uploadForm = document.getElementById('upload-form');
const uploadErrors = document.getElementById('upload-errors');
const filter = document.getElementById('filter-form');
const container = document.getElementById('rates');
const more = document.getElementById('more');
let rows = [];
let cursor = '';

const upper = (v) => v.trim().toUpperCase();

async function load(append = false) {
  if (!append) { rows = []; cursor = ''; }
  try {
    const page = await api.get('/api/rates', { base: upper(filter.base.value), quote: upper(filter.quote.value),
      from: filter.from.value, to: filter.to.value, limit: 50, cursor });
    rows = rows.concat(page.data);
    cursor = page.next_cursor;
    table(container, [
      { label: t('rates.date'), render: (r) => fmt.date(r.date) },
      { label: t('rates.pair'), class: 'mono', render: (r) => `${r.base}/${r.quote}` },
      // The rate is an exact decimal string: shown as it is, never through a float.
      { label: t('rates.rate'), class: 'num mono', render: (r) => r.rate },
      { label: t('rates.updated'), render: (r) => fmt.dateTime(r.updated_at) },
    ], rows, { caption: t('page.rates.title'), empty: t('rates.empty') });
    more.hidden = !cursor;
  } catch (err) {
    showError(err);
  }
}

setForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const body = { date: setForm.date.value, base: upper(setForm.base.value), quote: upper(setForm.quote.value), rate: localeAmount(setForm.rate.value) };
  await busy(setForm, async () => {
    try {
      const r = await api.put('/api/rates', body);
      flash(t('rates.saved', { pair: `${r.base}/${r.quote}`, rate: r.rate, date: fmt.date(r.date) }));
      await load();
    } catch (err) {
      showError(err, setForm);
    }
  });
});

uploadForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  uploadErrors.hidden = true;
  const file = uploadForm.file.files[0];
  if (!file) { flash(t('rates.no_file'), 'error'); return; }
  await busy(uploadForm, async () => {
    try {
      const res = await api.upload('/api/rates/import', await file.text(), 'text/csv');
      flash(t('rates.uploaded', { n: fmt.number(res.imported) }));
      uploadForm.reset();
      await load();
    } catch (err) {
      const lines = err.problem && err.problem.lines;
      if (!lines) { showError(err); return; }
      flash(t('rates.upload_refused', { n: fmt.number(lines.length) }), 'error');
      uploadErrors.replaceChildren(...lines.map((l) => h('li', {},
        t('rates.line', { line: l.line }) + ': ' + l.errors.map((f) => `${f.field} ${f.message}`).join('; '))));
      uploadErrors.hidden = false;
    }
  });
});

filter.addEventListener('submit', (e) => { e.preventDefault(); load(); });
more.addEventListener('click', () => load(true));
document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
setForm.date.value = new Date().toISOString().slice(0, 10);
load();
