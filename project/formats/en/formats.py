"""The service's date formats: every date Django renders in the console (the run pages, the
marks, parks and holds lists) reads as the console's own pages write one
(checkpoints.codec.render.moment_text): to the second, with the zone named."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
