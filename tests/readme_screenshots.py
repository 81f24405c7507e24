"""The README's screenshots come from the suite's own browser tests: a test calls
`keep(page, name)` at the moment worth showing, and `make screenshots` runs those tests with
`FALAI_SCREENSHOTS` naming docs/screenshots/, where each becomes `<name>.jpg` (the window only,
as JPEG: small enough to keep in the repository). Otherwise `keep` does nothing."""

from __future__ import annotations

import os
from pathlib import Path

README_SHOTS = ("playground", "conversation", "desk", "flow-editor")


def keep(page, name: str, top: str | None = None) -> Path | None:  # noqa: ANN001 - a Playwright Page
    """Save the window as the README's `name`, scrolled to the page's top or to the element
    `top` (a CSS selector)."""
    folder = os.environ.get("FALAI_SCREENSHOTS")
    if not folder:
        return None
    if name not in README_SHOTS:
        raise ValueError(f"{name!r} is not one of the README's screenshots {README_SHOTS}")
    path = Path(folder) / f"{name}.jpg"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.mouse.move(0, 0)  # no hover state in the picture
    if top is None:
        page.evaluate("window.scrollTo(0, 0)")
    else:
        page.locator(top).first.evaluate("el => el.scrollIntoView()")
    page.screenshot(path=str(path), type="jpeg", quality=72, animations="disabled", caret="hide")
    return path
