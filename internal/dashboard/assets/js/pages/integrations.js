import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { busy, clearFieldErrors, clearFlash, flash, h, showError } from '../ui.js';

// A program's integrations (docs/integrations.md): the tracking script's settings and the
// Stripe endpoint.
const canWrite = boot.role !== 'member';
const select = document.getElementById('int-program');
const scriptForm = document.getElementById('script-form');
const stripeForm = document.getElementById('stripe-form');
const lines = (s) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
const program = () => encodeURIComponent(select.value);

function showScript(s) {
  scriptForm.origins.value = s.origins.join('\n');
  scriptForm.params.value = s.params.join(', ');
  scriptForm.model.value = s.model;
  document.getElementById('script-cookie').textContent = t('integrations.cookie_days', { days: s.cookie_days });
  // Which program the form shows, once its settings are in.
  scriptForm.dataset.program = s.program_id;
}

async function showStripe() {
  const status = document.getElementById('stripe-status');
  const disconnect = document.getElementById('stripe-disconnect');
  try {
    const s = await api.get(`/api/programs/${program()}/integrations/stripe`);
    status.textContent = t('integrations.connected', { date: fmt.dateTime(s.created_at),
      last: s.last_event_at ? fmt.dateTime(s.last_event_at) : t('integrations.no_event') });
    disconnect.hidden = false;
  } catch (err) {
    if (err.status !== 404) throw err;
    status.textContent = t('integrations.not_connected');
    disconnect.hidden = true;
  }
}

async function load() {
  if (!select.value) return;
  document.getElementById('stripe-url-box').hidden = true;
  try {
    showScript(await api.get(`/api/programs/${program()}/tracking-script`));
    await showStripe();
  } catch (err) {
    showError(err);
  }
}

scriptForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  await busy(scriptForm, async () => {
    try {
      showScript(await api.put(`/api/programs/${program()}/tracking-script`, {
        origins: lines(scriptForm.origins.value), params: lines(scriptForm.params.value), model: scriptForm.model.value }));
      clearFieldErrors(scriptForm);
      flash(t('integrations.script_saved'));
    } catch (err) {
      // origins[2] is the origins field's third line: the error goes under the field.
      for (const fe of (err.problem && err.problem.errors) || []) fe.field = fe.field.replace(/\[\d+\]$/, '');
      showError(err, scriptForm);
    }
  });
});

stripeForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  await busy(stripeForm, async () => {
    try {
      const s = await api.put(`/api/programs/${program()}/integrations/stripe`, { endpoint_secret: stripeForm.endpoint_secret.value.trim() });
      stripeForm.reset();
      document.getElementById('stripe-url').value = location.origin + s.webhook_url;
      document.getElementById('stripe-url-box').hidden = false;
      flash(t('integrations.stripe_connected'));
      await showStripe();
    } catch (err) {
      showError(err, stripeForm);
    }
  });
});

document.getElementById('stripe-disconnect').addEventListener('click', async () => {
  if (!confirm(t('integrations.disconnect_confirm'))) return;
  clearFlash();
  try {
    await api.del(`/api/programs/${program()}/integrations/stripe`);
    document.getElementById('stripe-url-box').hidden = true;
    flash(t('integrations.stripe_disconnected'));
    await showStripe();
  } catch (err) {
    showError(err);
  }
});

if (!canWrite) for (const f of [scriptForm, stripeForm]) for (const el of f.elements) el.disabled = true;
select.addEventListener('change', load);
api.get('/api/programs', { limit: 100 }).then((page) => {
  select.replaceChildren(...page.data.map((p) => h('option', { value: p.id }, p.name)));
  return load();
}).catch(showError);
