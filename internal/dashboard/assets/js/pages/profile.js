import { api, APIError } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { busy, clearFlash, flash, showError } from '../ui.js';

const canWrite = boot.role !== 'member';
const form = document.getElementById('profile-form');
const fields = ['display_name', 'website', 'audience', 'payout_email'];

function show(p) {
  for (const f of fields) form[f].value = p[f] || '';
  document.getElementById('pf-updated').textContent = p.updated_at
    ? t('people.profile.updated', { date: fmt.dateTime(p.updated_at) }) : t('people.profile.never_saved');
}

// markFields puts each refused field's message under it (aria-invalid) and the keyboard on
// the first; it reports whether the error named any field of the form.
function markFields(errors) {
  let first = null;
  for (const f of fields) {
    const e = errors.find((x) => x.field === f);
    const note = document.getElementById(`pf-${f}-error`);
    note.hidden = !e;
    note.textContent = e ? t('people.profile.invalid_' + f) : '';
    if (e) {
      form[f].setAttribute('aria-invalid', 'true');
      first = first || form[f];
    } else {
      form[f].removeAttribute('aria-invalid');
    }
  }
  if (first) first.focus();
  return first !== null;
}

async function load() {
  try {
    show(await api.get('/api/profile'));
  } catch (err) {
    showError(err);
  }
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const body = Object.fromEntries(fields.map((f) => [f, form[f].value.trim()]));
  if (!body.display_name) {
    markFields([{ field: 'display_name' }]);
    flash(t('common.fill_required'), 'error');
    return;
  }
  let refused = null;
  await busy(form, async () => {
    try {
      show(await api.put('/api/profile', body));
      markFields([]);
      flash(t('people.profile.saved'));
    } catch (err) {
      refused = err;
    }
  });
  // After busy(): a disabled field cannot take the focus.
  if (refused) {
    const errors = refused instanceof APIError && Array.isArray(refused.problem.errors) ? refused.problem.errors : [];
    if (markFields(errors)) flash(t('people.profile.fix_fields'), 'error');
    else showError(refused);
  }
});
if (!canWrite) {
  for (const f of fields) form[f].readOnly = true;
}
document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
load();
