# The demo shows times to people in one format everywhere (falai_django.playground.display.DATETIME_FORMAT):
# the admin's lists and fields, the playground, the terminal.
DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
DATE_FORMAT = "Y-m-d"
