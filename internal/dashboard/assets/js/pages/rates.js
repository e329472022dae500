// Exchange rates the advertiser keeps: set one, upload a CSV (all or nothing), list them.
import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { busy, checkRequired, clearFieldErrors, clearFlash, fieldError, fieldMessage, fillCurrencies, flash, h, localeAmount, showError, table } from '../ui.js';

const canWrite = boot.role !== 'member';
const setForm = document.getElementById('rate-form');
const uploadForm = document.getElementById('upload-form');
const uploadErrors = document.getElementById('upload-errors');
const filter = document.getElementById('filter-form');
const container = document.getElementById('rates');
const more = document.getElementById('more');
let rows = [];
let cursor = '';

async function load(append = false) {
  if (!append) { rows = []; cursor = ''; }
  try {
    const page = await api.get('/api/rates', { base: filter.base.value, quote: filter.quote.value,
      from: filter.from.value, to: filter.to.value, limit: 50, cursor });
    clearFieldErrors(filter);
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
    // A refused filter is marked on its field.
    showError(err, filter);
  }
}

setForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  if (!checkRequired(setForm)) return;
  const body = { date: setForm.date.value, base: setForm.base.value, quote: setForm.quote.value, rate: localeAmount(setForm.rate.value) };
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
  if (!file) { fieldError(uploadForm, 'file', t('rates.no_file')); return; }
  clearFieldErrors(uploadForm);
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
        // A value's refusal in the page's language; the file's shape (a line that is no CSV,
        // a missing column) as the API says it, which has no translation.
        t('rates.line', { line: l.line }) + ': ' + l.errors.map((f) => `${f.field}: ${f.code === 'invalid' ? f.message : fieldMessage(f)}`).join('; '))));
      uploadErrors.hidden = false;
    }
  });
});

filter.addEventListener('submit', (e) => { e.preventDefault(); load(); });
more.addEventListener('click', () => load(true));
document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
// The pair most brands start with; the date is today's (UTC, as rates are dated). The
// filter's lists keep the bare codes, which the table shows, and stay narrow.
fillCurrencies(setForm.base, 'USD');
fillCurrencies(setForm.quote, 'EUR');
setForm.date.value = new Date().toISOString().slice(0, 10);
load();
