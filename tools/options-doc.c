/* options-doc markdown|roff: prints the table of HAKMEM_* options from
 * src/options_table.c, the table the library reads them with, so that the
 * options table of README.md (markdown) and the ENVIRONMENT section of
 * hakmem(3) (roff) cannot drift from the code: names, defaults and
 * descriptions all come from there.  In a description, `text` is literal
 * text: code in markdown, bold in roff. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "options.h"

/* hak_options holds the compiled-in defaults: nothing here loads the
 * environment. */
static const char *default_text(const struct hak_option *opt, char *buf, size_t size)
{
    uint64_t value = 0;
    switch (opt->type) {
    case HAK_OPT_CHOICE:
        return opt->choices[*(const uint32_t *)opt->value];
    case HAK_OPT_PATH:
        return *(const char *)opt->value ? (const char *)opt->value : NULL;
    case HAK_OPT_BYTES:
        value = *(const size_t *)opt->value;
        break;
    case HAK_OPT_U32:
        value = *(const uint32_t *)opt->value;
        break;
    case HAK_OPT_U64:
        value = *(const uint64_t *)opt->value;
        break;
    }
    /* Sizes as a user would write them, with the suffixes the parser takes. */
    const char *suffix = "";
    if (opt->type == HAK_OPT_BYTES && value) {
        static const char suffixes[][2] = {"G", "M", "K"};
        for (unsigned i = 0; i < 3; i++) {
            unsigned shift = 30 - 10 * i;
            if (value % ((uint64_t)1 << shift) == 0) {
                value >>= shift;
                suffix = suffixes[i];
                break;
            }
        }
    }
    snprintf(buf, size, "%" PRIu64 "%s", value, suffix);
    return buf;
}

static const char *description(const struct hak_option *opt)
{
    return opt->doc ? opt->doc : opt->help;
}

/* A table cell: | would end it. */
static void put_markdown(const char *text)
{
    for (; *text; text++) {
        if (*text == '|')
            fputc('\\', stdout);
        fputc(*text, stdout);
    }
}

static void print_markdown(void)
{
    int name_width = (int)strlen("Variable"), default_width = (int)strlen("Default");
    char buf[32];
    for (size_t i = 0; i < hak_option_count; i++) {
        const struct hak_option *opt = &hak_option_table[i];
        const char *value = default_text(opt, buf, sizeof(buf));
        int name_len = (int)strlen(opt->name) + 2;
        int default_len = value ? (int)strlen(value) + 2 : (int)strlen("(unset)");
        name_width = name_len > name_width ? name_len : name_width;
        default_width = default_len > default_width ? default_len : default_width;
    }
    printf("| %-*s | %-*s | Meaning |\n|-", name_width, "Variable", default_width, "Default");
    for (int i = 0; i < name_width; i++)
        putchar('-');
    printf("-|-");
    for (int i = 0; i < default_width; i++)
        putchar('-');
    printf("-|---------|\n");
    for (size_t i = 0; i < hak_option_count; i++) {
        const struct hak_option *opt = &hak_option_table[i];
        const char *value = default_text(opt, buf, sizeof(buf));
        char cell[64];
        snprintf(cell, sizeof(cell), "`%s`", opt->name);
        printf("| %-*s | ", name_width, cell);
        if (value)
            snprintf(cell, sizeof(cell), "`%s`", value);
        else
            snprintf(cell, sizeof(cell), "(unset)");
        printf("%-*s | ", default_width, cell);
        put_markdown(description(opt));
        printf(" |\n");
    }
}

/* Text on a roff line of its own: backslashes escaped, `text` in bold, with
 * \- for its dashes (a minus sign, which searches and copies find as the
 * ASCII one; a dash in prose stays a hyphen). */
static void put_roff(const char *text)
{
    bool bold = false;
    if (*text == '.' || *text == '\'')
        fputs("\\&", stdout);
    for (; *text; text++) {
        if (*text == '`') {
            fputs(bold ? "\\fR" : "\\fB", stdout);
            bold = !bold;
        } else if (*text == '\\') {
            fputs("\\e", stdout);
        } else if (*text == '-' && bold) {
            fputs("\\-", stdout);
        } else {
            fputc(*text, stdout);
        }
    }
}

static void print_roff(void)
{
    char buf[32];
    for (size_t i = 0; i < hak_option_count; i++) {
        const struct hak_option *opt = &hak_option_table[i];
        printf(".TP\n\\fB%s\\fR=", opt->name);
        switch (opt->type) {
        case HAK_OPT_CHOICE:
            for (unsigned c = 0; opt->choices[c]; c++)
                printf("%s\\fB%s\\fR", c ? "|" : "", opt->choices[c]);
            break;
        case HAK_OPT_BYTES:
            printf("\\fIsize\\fR");
            break;
        case HAK_OPT_U32:
        case HAK_OPT_U64:
            printf("\\fIn\\fR");
            break;
        case HAK_OPT_PATH:
            printf("\\fIpath\\fR");
            break;
        }
        printf("\n");
        /* A sentence in the page; the table's cells start in lower case. */
        const char *text = description(opt);
        if (*text >= 'a' && *text <= 'z')
            printf("%c", *text++ - 'a' + 'A');
        put_roff(text);
        const char *value = default_text(opt, buf, sizeof(buf));
        if (value) {
            printf(".\nDefault: \\fB");
            put_roff(value);
            printf("\\fR.\n");
        } else {
            printf(".\nUnset by default.\n");
        }
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "markdown")) {
        print_markdown();
    } else if (argc == 2 && !strcmp(argv[1], "roff")) {
        print_roff();
    } else {
        fprintf(stderr, "usage: options-doc markdown|roff\n");
        return 2;
    }
    return fflush(stdout) ? 1 : 0;
}
