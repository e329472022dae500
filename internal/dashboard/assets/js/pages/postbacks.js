import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { deliveryTable, healthPanel } from '../deliveries.js';
import { sendTest } from '../sendtest.js';
import { busy, clearFlash, flash, showError } from '../ui.js';

const canWrite = boot.role !== 'member';
const form = document.getElementById('postback-form');
const secretBox = document.getElementById('pb-secret');

function showSettings(s) {
  form.url.value = s.url || '';
  document.getElementById('pb-secret-info').textContent = s.secret_created_at
    ? t('postbacks.secret_since', { date: fmt.dateTime(s.secret_created_at) }) : t('postbacks.no_secret');
  document.getElementById('pb-rotate').disabled = !s.url;
  document.getElementById('pb-test').disabled = !s.url;
}

function showSecret(secret) {
  if (!secret) return;
  document.getElementById('pb-secret-value').value = secret;
  secretBox.hidden = false;
  document.getElementById('pb-secret-value').focus();
}

async function load() {
  try {
    showSettings(await api.get('/api/postbacks'));
  } catch (err) {
    showError(err);
  }
  loadDeliveries();
}

// showHealth shows the postback URL's health; once it is enabled again after being disabled,
// it offers to replay what failed meanwhile (e: the health, with failing_since and
// failed_since_failing of the time it was failing).
function showHealth(e) {
  healthPanel(document.getElementById('pb-health'), e, canWrite, {
    disabled: e.breaker === 'disabled',
    enable: async () => {
      try {
        const r = await api.post('/api/postbacks/enable', {});
        flash(t('health.enabled'));
        showHealth({ ...r.endpoint, failing_since: r.failing_since, failed_since_failing: r.failed });
      } catch (err) {
        showError(err);
      }
    },
    replay: async () => {
      try {
        const r = await api.post('/api/webhooks/retry-failed', { postbacks: true, from: e.failing_since });
        flash(t('deliveries.queued', { n: fmt.number(r.queued) }));
        await loadDeliveries();
      } catch (err) {
        showError(err);
      }
    },
  });
}

async function loadDeliveries() {
  const container = document.getElementById('pb-deliveries');
  try {
    const page = await api.get('/api/postbacks/deliveries', { limit: 50 });
    showHealth(page.endpoint);
    deliveryTable(container, page.data, canWrite, async (d) => {
      try {
        await api.post(`/api/webhooks/${encodeURIComponent(d.id)}/replay`);
        flash(t('deliveries.replayed'));
        await loadDeliveries();
      } catch (err) {
        showError(err);
      }
    });
  } catch (err) {
    showError(err);
  }
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const url = form.url.value.trim() || null;
  await busy(form, async () => {
    try {
      const s = await api.put('/api/postbacks', { url });
      showSettings(s);
      showSecret(s.secret);
      flash(url ? t('postbacks.saved') : t('postbacks.removed'));
    } catch (err) {
      showError(err, form);
    }
  });
});

document.getElementById('pb-rotate').addEventListener('click', async () => {
  clearFlash();
  if (!confirm(t('postbacks.rotate_confirm'))) return;
  try {
    const r = await api.put('/api/postbacks/rotate-secret', {});
    showSecret(r.secret);
    flash(r.previous_secret_expires_at ? t('webhooks.rotated_done', { date: fmt.dateTime(r.previous_secret_expires_at) }) : t('postbacks.rotated'));
    await load();
  } catch (err) {
    showError(err);
  }
});

document.getElementById('pb-test').addEventListener('click', async () => {
  clearFlash();
  await sendTest({ postback: true });
  await loadDeliveries();
});

document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
load();
