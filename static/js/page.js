// Behaviour that used to sit in inline attributes, which the Content-Security-Policy
// (script-src 'self') refuses to run: a form that asks before it posts (data-confirm) and a
// select that submits its form when changed (data-autosubmit).
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});
document.addEventListener("change", (event) => {
  const field = event.target.closest("[data-autosubmit]");
  if (field && field.form) field.form.requestSubmit();
});
