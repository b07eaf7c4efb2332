/* The statistics report (stats_report.c). */
#ifndef HAK_STATS_REPORT_H
#define HAK_STATS_REPORT_H

/* Start-up, once the options are read: keeps what the report at exit
 * needs (a copy of stderr). */
void hak_stats_setup(void);
/* The report HAKMEM_STATS asks for, where HAKMEM_STATS_FILE says. */
void hak_stats_report_at_exit(void);

#endif
