#!/bin/sh
# More real programs under LD_PRELOAD=libhakmem.so, each run with and without
# hakmem and required to give the same output (test_preload.sh covers
# python3 building JSON, sort, gcc and a C++ program):
#   perl     a script with hashes, regular expressions, sort and sprintf
#   git      init, add and commit a few hundred files, log, diff, gc, fsck,
#            with fixed names and dates so that commit ids must match too
#   sqlite3  a few thousand inserts, an index, joins and aggregates
#   redis    redis-server on 127.0.0.1 driven by redis-cli and
#            redis-benchmark (20,000 requests a test), INFO under hakmem
#   python3  a slice of CPython's own regression tests
# A program that is not installed is skipped with the package to install;
# if none could run, the test is skipped.
set -u

preload_test=real_programs
. "$(dirname "$0")/../preload_compare.sh"

# --- perl ----------------------------------------------------------------
run_perl()
{
    LD_PRELOAD=$HAKMEM_PRELOAD perl "$work/workload.pl"
}

if command -v perl >/dev/null 2>&1; then
    cat >"$work/workload.pl" <<'EOF'
use strict;
use warnings;

# Deterministic text: a linear congruential generator picks the words.
my @syllables = qw(ka lo mi ne ru sa ti vo xe zu ba do fi gu);
my $state = 12345;
sub next_random {
    $state = ($state * 1103515245 + 12345) % 2147483648;
    return $state;
}
my @lines;
for my $line (1 .. 40000) {
    my @words;
    for (1 .. 3 + next_random() % 9) {
        my $length = 1 + next_random() % 4;
        my $word = join "", map { $syllables[next_random() % @syllables] } 1 .. $length;
        push @words, $word;
    }
    push @lines, join(" ", @words) . " #" . next_random() % 1000;
}

my (%count, %by_length, %pairs);
for my $line (@lines) {
    my ($text, $tag) = $line =~ /^(.*) #(\d+)$/ or die "no tag in $line";
    for my $word (split / /, $text) {
        $count{$word}++;
        push @{ $by_length{length $word} }, $word if $count{$word} == 1;
    }
    while ($text =~ /\b(\w+) (\w+)\b/g) {
        $pairs{"$1+$2"} += $tag;
    }
}
my $rewritten = 0;
for my $line (@lines) {
    (my $copy = $line) =~ s/(ka|zu)(\w*)/uc($1) . reverse($2)/ge;
    $rewritten += length $copy;
}
my @top = (sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count)[0 .. 199];
printf "%-20s %d\n", $_, $count{$_} for @top;
for my $length (sort { $a <=> $b } keys %by_length) {
    my @words = sort @{ $by_length{$length} };
    printf "length %d: %d words, first %s, last %s\n", $length, scalar @words, $words[0],
        $words[-1];
}
my @pair_keys = sort { $pairs{$b} <=> $pairs{$a} || $a cmp $b } keys %pairs;
print "$_ $pairs{$_}\n" for @pair_keys[0 .. 99];
print "pairs ", scalar(keys %pairs), " rewritten $rewritten\n";
EOF
    compare perl run_perl
else
    skip perl perl
fi

# --- git -----------------------------------------------------------------
# Every run starts from an empty folder and the same environment, so that
# object ids, and with them all of the output, are reproducible.
run_git()
{
    (
        repo=$work/$run_tag
        rm -rf "$repo" && mkdir -p "$repo" && cd "$repo" || exit 1
        HOME=$repo GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=Tester \
            GIT_AUTHOR_EMAIL=tester@example.com GIT_COMMITTER_NAME=Tester \
            GIT_COMMITTER_EMAIL=tester@example.com TZ=UTC
        export HOME GIT_CONFIG_NOSYSTEM GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME \
            GIT_COMMITTER_EMAIL TZ
        git()
        {
            LD_PRELOAD=$HAKMEM_PRELOAD command git -c init.defaultBranch=main -c gc.auto=0 "$@"
        }
        git init -q . || exit 1
        for commit in 1 2 3 4 5 6; do
            GIT_AUTHOR_DATE="2024-01-0$commit 12:00:00 +0000"
            GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE
            export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
            if [ "$commit" -eq 4 ]; then
                git rm -q -r dir05 || exit 1
            fi
            awk -v commit="$commit" 'BEGIN {
                for (i = 0; i < 300; i++) {
                    if (commit > 1 && i % (commit + 1) != 0)
                        continue
                    dir = sprintf("dir%02d/sub%d", i % 23, i % 3)
                    system("mkdir -p " dir)
                    file = sprintf("%s/file%03d.txt", dir, i)
                    for (line = 0; line < 20 + i % 40; line++)
                        printf "commit %d file %d line %d %s\n", commit, i, line,
                            substr("abcdefghijklmnopqrstuvwxyz", 1 + (i + line) % 26) >file
                    close(file)
                }
            }' || exit 1
            git add -A . || exit 1
            git commit -q -m "commit $commit" || exit 1
        done
        git log --stat --format='%H %an %ad %s' || exit 1
        git diff --stat HEAD~3 HEAD || exit 1
        git grep -c 'line 7 h' HEAD~2 -- 'dir1*' || exit 1
        git gc -q --aggressive || exit 1
        git fsck --no-progress --strict || exit 1
        git count-objects -v | grep -E '^(count|in-pack|packs|garbage):' || exit 1
        git ls-tree -r HEAD | wc -l || exit 1
    )
}

if command -v git >/dev/null 2>&1; then
    compare git run_git
else
    skip git git
fi

# --- sqlite3 -------------------------------------------------------------
run_sqlite()
{
    rm -f "$work/$run_tag.db"
    LD_PRELOAD=$HAKMEM_PRELOAD sqlite3 -batch -bail "$work/$run_tag.db" <"$work/workload.sql"
}

if command -v sqlite3 >/dev/null 2>&1; then
    cat >"$work/workload.sql" <<'EOF'
PRAGMA journal_mode = WAL;
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer INTEGER, amount INTEGER, note TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO customers SELECT i, 'customer ' || i, 'city ' || (i * 7919 % 37) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 8000)
INSERT INTO orders
SELECT i, 1 + i * 104729 % 2000, i * 31 % 977, printf('%.*c', i % 300, 'x') FROM n;
COMMIT;
CREATE INDEX orders_by_customer ON orders (customer);
UPDATE orders SET note = upper(note) || id WHERE amount % 5 = 0;
DELETE FROM orders WHERE amount % 11 = 0;
SELECT city, count(*), sum(amount), max(length(note))
FROM customers JOIN orders ON orders.customer = customers.id
GROUP BY city ORDER BY sum(amount) DESC, city;
SELECT name, group_concat(amount, ',') FROM customers JOIN orders ON orders.customer = customers.id
WHERE customers.id % 97 = 0 GROUP BY name ORDER BY name;
SELECT count(*) FROM orders WHERE note LIKE 'XX%';
VACUUM;
PRAGMA integrity_check;
EOF
    compare sqlite3 run_sqlite
else
    skip sqlite3 sqlite3
fi

# --- redis ---------------------------------------------------------------
# A server on a free port of 127.0.0.1, a fixed command sequence through
# redis-cli (compared), redis-benchmark with bounded counts and INFO
# (checked, since timings and memory figures differ from run to run).
run_redis()
{
    port=
    for candidate in 16379 16479 16579 16679 16779 16879 16979 17079; do
        rm -f "$work/redis.log"
        LD_PRELOAD=$HAKMEM_PRELOAD redis-server --bind 127.0.0.1 --port "$candidate" --save '' \
            --appendonly no --dir "$work" --logfile "$work/redis.log" &
        background_pid=$!
        tries=0
        while [ "$tries" -lt 50 ] && kill -0 "$background_pid" 2>/dev/null; do
            # The server that answers must be this one: another run of this
            # test may hold the port.
            if LD_PRELOAD=$HAKMEM_PRELOAD redis-cli -p "$candidate" info server 2>/dev/null |
                tr -d '\r' | grep -q -x "process_id:$background_pid"; then
                port=$candidate
                break
            fi
            sleep 0.1
            tries=$((tries + 1))
        done
        if [ -n "$port" ]; then
            break
        fi
        kill "$background_pid" 2>/dev/null
        wait "$background_pid" 2>/dev/null
        background_pid=
    done
    if [ -z "$port" ]; then
        echo "redis-server did not start on any port tried:" >&2
        tail -n 5 "$work/redis.log" >&2
        return 1
    fi
    if [ -n "$HAKMEM_PRELOAD" ] &&
        ! grep -q -F "$(readlink -f "$HAKMEM_PRELOAD")" "/proc/$background_pid/maps"; then
        echo "hakmem is not mapped into redis-server" >&2
        return 1
    fi
    cli()
    {
        LD_PRELOAD=$HAKMEM_PRELOAD redis-cli -p "$port" "$@"
    }
    status=0
    {
        cli flushall
        for i in $(seq 1 200); do
            echo "SET key:$i $(printf '%0*d' $((i * 13 % 3000)) "$i")"
            echo "RPUSH list:$((i % 7)) item$i"
            echo "HSET hash:$((i % 5)) field$i $((i * i))"
            echo "SADD set:$((i % 3)) member$((i % 50))"
            echo "ZADD zset $((i * 37 % 101)) m$i"
        done | cli >/dev/null
        cli dbsize
        cli get key:150 | wc -c
        cli lrange list:3 0 -1
        cli hgetall hash:2 | sort
        cli smembers set:1 | sort
        cli zrange zset 0 20 withscores
        cli strlen key:199
        cli append key:1 "-appended"
        cli get key:1
        cli del list:1 hash:4
        cli dbsize
    } || status=1
    if ! LD_PRELOAD=$HAKMEM_PRELOAD redis-benchmark -p "$port" -n 20000 -c 10 -d 200 -q \
        -t set,get,incr,lpush,rpop,sadd,hset,lrange_100,mset >"$work/redis-benchmark.out" 2>&1 ||
        [ "$(grep -c 'requests per second' "$work/redis-benchmark.out")" -lt 9 ]; then
        echo "redis-benchmark failed:" >&2
        cat "$work/redis-benchmark.out" >&2
        status=1
    fi
    info=$(cli info) || status=1
    for field in redis_version used_memory total_commands_processed; do
        if ! echo "$info" | grep -q "^$field:"; then
            echo "INFO lacks $field" >&2
            status=1
        fi
    done
    cli dbsize
    cli shutdown nosave >/dev/null 2>&1
    wait "$background_pid"
    background_pid=
    return "$status"
}

if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 &&
    command -v redis-benchmark >/dev/null 2>&1; then
    compare redis run_redis
else
    skip "redis-server, redis-cli or redis-benchmark" "redis-server redis-tools"
fi

# --- python3 regression tests ----------------------------------------------
# Debian's /usr/bin/python3 with its test package; regrtest's report carries
# timings, so what is compared is the list of results.
python_tests="test_dict test_list test_set test_json test_re test_sort test_bytes
    test_collections test_unicode test_deque test_heapq test_itertools"

run_python_tests()
{
    # shellcheck disable=SC2086
    LD_PRELOAD=$HAKMEM_PRELOAD /usr/bin/python3 -m test --timeout 300 $python_tests \
        >"$work/$run_tag.regrtest" 2>&1
    status=$?
    grep -E '^(All [0-9]+ tests OK|[0-9]+ tests? (OK|failed|skipped)|Tests result:)' \
        "$work/$run_tag.regrtest"
    grep -E '^    test_' "$work/$run_tag.regrtest"
    return "$status"
}

if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import test.test_dict' 2>/dev/null; then
    compare python3-regrtest run_python_tests
else
    skip "Python's regression tests for /usr/bin/python3" "python3 libpython3.11-testsuite"
fi

preload_finish
