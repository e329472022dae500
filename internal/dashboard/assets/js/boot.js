// The page's data island: locale, company kind, role and the message catalogue.
export const boot = JSON.parse(document.getElementById('boot').textContent);
export const locale = boot.locale;

// t returns a message of the catalogue with {name} placeholders filled. A missing id shows
// itself in brackets (the catalogue test keeps that from shipping).
export function t(id, vars = {}) {
  const msg = boot.messages[id];
  if (msg === undefined) return `[${id}]`;
  return msg.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
}

const numberFmt = new Intl.NumberFormat(locale);
const percentFmt = new Intl.NumberFormat(locale, { style: 'percent', maximumFractionDigits: 2 });
const dateTimeFmt = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short' });
const dayFmt = new Intl.DateTimeFormat(locale, { day: 'numeric', month: 'short', timeZone: 'UTC' });
const dateFmt = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeZone: 'UTC' });

export const fmt = {
  number: (n) => numberFmt.format(n),
  percent: (n) => percentFmt.format(n),
  // Amounts arrive as exact decimal strings; Intl formats strings exactly.
  // Money is never a bare number: without its currency it is not shown.
  money: (amount, currency) => {
    if (amount == null || !currency) return '–';
    return new Intl.NumberFormat(locale, { style: 'currency', currency }).format(amount);
  },
  dateTime: (iso) => (iso ? dateTimeFmt.format(new Date(iso)) : '–'),
  // A UTC calendar day (YYYY-MM-DD).
  day: (d) => dayFmt.format(new Date(d + 'T00:00:00Z')),
  date: (d) => (d ? dateFmt.format(new Date(d.length === 10 ? d + 'T00:00:00Z' : d)) : '–'),
};
