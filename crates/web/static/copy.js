// Copy buttons: <button data-copy="input-id">. The page works without this.
document.querySelectorAll("button[data-copy]").forEach(function (button) {
  button.addEventListener("click", function () {
    var input = document.getElementById(button.dataset.copy);
    input.select();
    if (navigator.clipboard) { navigator.clipboard.writeText(input.value); }
    button.textContent = "Copied";
  });
});
