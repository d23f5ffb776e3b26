/* HTML output helpers of the report: escaping, so a run directory or a metric name can never
 * break the page (the names come from the command line and from files on disk). */
#ifndef DT_REPORT_HTML_H
#define DT_REPORT_HTML_H

#include <stdio.h>

/* Writes s escaped for HTML text and for a quoted attribute value (& < > " '). */
void dt_html_esc(FILE *f, const char *s);
/* printf into a buffer (4 KiB, truncated beyond), then dt_html_esc. */
void dt_html_escf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
