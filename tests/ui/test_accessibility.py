"""Keyboard and label checks in the real browser: a skip link first in tab order, every form control labelled."""
import pytest

from tests import builders

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]

UNLABELLED = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(el => el.labels.length === 0 && !el.getAttribute('aria-label')).map(el => el.name || el.id)"""


def test_first_tab_reaches_a_visible_skip_link_that_moves_focus_to_the_content(admin_page):
    page = admin_page
    page.goto("/jobs/")
    page.keyboard.press("Tab")
    focused = page.evaluate("() => [document.activeElement.textContent, "
                            "document.activeElement.getBoundingClientRect().left]")
    assert focused[0] == "Skip to content" and focused[1] >= 0
    page.keyboard.press("Enter")
    assert page.url.endswith("#main")


@pytest.mark.parametrize("url", ["/accounts/login/", "/jobs/", "/submit/?template=llm", "/templates/new/",
                                 "/queues/new/", "/clusters/new/", "/templates/", "/queues/"])
def test_every_form_control_has_a_label(admin_page, url):
    builders.make_template("llm")
    page = admin_page
    if url == "/accounts/login/":
        page.context.clear_cookies()  # the login form as a visitor sees it
    page.goto(url)
    assert page.evaluate(UNLABELLED) == []
