"""Headless Chromium for the browser tests, driven by Selenium, in a
profile of its own."""

import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def browser(width, height, mobile=False, flags=()):
    options = webdriver.ChromeOptions()
    if mobile:
        options.add_experimental_option(
            "mobileEmulation", {"deviceMetrics": {"width": width, "height": height, "pixelRatio": 2}})
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--user-data-dir=" + tempfile.mkdtemp(prefix="taskmill-chromium-"),
                 "--window-size=%d,%d" % (width, height)) + tuple(flags):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
