# The manual pages, made from docs/man/*.in.  The ENVIRONMENT section of
# hakmem(3) is the options table of src/options_table.c, printed by
# tools/options-doc, which links that file alone: the names, defaults and
# descriptions in the page are those the library reads.  README.md's options
# table comes from the same program (make update-readme), and
# tests/test_docs.sh fails when either has drifted.
man_MANS = docs/man/hakmem.1 docs/man/hakmem-compare.1 docs/man/hakmem.3
CLEANFILES += $(man_MANS) docs/man/hakmem.3.options
EXTRA_DIST += docs/man/hakmem.1.in docs/man/hakmem-compare.1.in docs/man/hakmem.3.in

# Run at build time, so it is built for the build machine: a cross build
# would need it built with the build machine's compiler instead.
noinst_PROGRAMS += tools/options-doc
tools_options_doc_SOURCES = tools/options-doc.c src/options_table.c src/options.h
tools_options_doc_CPPFLAGS = -I$(top_srcdir)/src

man_substitute = sed -e 's|@libdir[@]|$(libdir)|g' -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g'

docs/man/hakmem.1: $(srcdir)/docs/man/hakmem.1.in Makefile
	$(AM_V_GEN)$(MKDIR_P) docs/man && $(man_substitute) $(srcdir)/docs/man/hakmem.1.in > $@.tmp && \
	mv $@.tmp $@

docs/man/hakmem-compare.1: $(srcdir)/docs/man/hakmem-compare.1.in Makefile
	$(AM_V_GEN)$(MKDIR_P) docs/man && \
	$(man_substitute) $(srcdir)/docs/man/hakmem-compare.1.in > $@.tmp && mv $@.tmp $@

# The table replaces the line @OPTIONS@.
docs/man/hakmem.3: $(srcdir)/docs/man/hakmem.3.in tools/options-doc$(EXEEXT) Makefile
	$(AM_V_GEN)$(MKDIR_P) docs/man && tools/options-doc roff > $@.options && \
	$(man_substitute) -e '/^@OPTIONS@$$/{' -e 'r $@.options' -e 'd' -e '}' \
	    $(srcdir)/docs/man/hakmem.3.in > $@.tmp && rm -f $@.options && mv $@.tmp $@

# Rewrites the options table of README.md in the source tree, between the
# lines <!-- options --> and <!-- /options -->.
update-readme: tools/options-doc$(EXEEXT)
	$(AM_V_GEN)tools/options-doc markdown > README.md.options && \
	awk -v table=README.md.options \
	    '/^<!-- \/options -->$$/ { skip = 0; print ""; while ((getline line < table) > 0) print line; print "" } \
	     !skip { print } \
	     /^<!-- options -->$$/ { skip = 1 } \
	     END { exit skip }' \
	    $(srcdir)/README.md > README.md.tmp && rm -f README.md.options && \
	mv README.md.tmp $(srcdir)/README.md

.PHONY: update-readme

TESTS += tests/test_docs.sh
EXTRA_DIST += tests/test_docs.sh
