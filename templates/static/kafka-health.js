// The web pages' one behaviour (served as /static/kafka-health.js: the Content-Security-Policy
// allows no inline script): a <select data-submit> submits its form when it changes.
document.addEventListener("change", (event) => {
  const target = event.target;
  if (target instanceof HTMLSelectElement && target.dataset.submit !== undefined && target.form) {
    target.form.submit();
  }
});
