// The conversation list asks once more before "Erase the selected conversations everywhere"
// runs: an erasure cannot be undone. The sentence comes from the page (translated there).
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("changelist-form");
  const sentence = document.getElementById("falai-erase-confirm");
  if (!form || !sentence) return;
  form.addEventListener("submit", (event) => {
    const action = form.querySelector("select[name=action]");
    if (!action || action.value !== "erase_selected") return;
    const count = form.querySelectorAll("input.action-select:checked").length;
    const across = form.querySelector("input[name=select_across]");
    const shown = across && across.value === "1" ? "all" : String(count);
    if (!window.confirm(JSON.parse(sentence.textContent).replace("COUNT", shown))) event.preventDefault();
  });
});
