// cxx_churn: C++ object churn through the standard containers, as a program
// built of small objects does it (after alloc-test): every round builds
// records of mixed small sizes (each a heap object with a std::string name
// and a std::vector of fields), keeps them in a std::map by name and a
// std::list, replaces a random third of them, and tears the rest down.
// Every allocation goes through operator new and delete, which hakmem
// exports, so LD_PRELOAD puts them under the allocator being measured.
// With threads > 1 each thread churns its own containers.
// ops = records created (each is 3-5 operator new calls).
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace
{

struct Record {
    std::string name;
    std::vector<uint32_t> fields;
    std::unique_ptr<Record> detail; // one in four records owns a smaller one

    Record(uint32_t draw, unsigned depth)
        // 8-71 characters: some fit the string's own buffer, most do not.
        : name(8 + draw % 64, static_cast<char>('a' + draw % 26)),
          fields(1 + (draw >> 8) % 48, draw)
    {
        if (depth == 0 && (draw >> 16) % 4 == 0)
            detail.reset(new Record(draw * 2654435761u, depth + 1));
    }
};

struct Churner {
    long rounds;
    uint32_t records;
    uint32_t state;
    long created = 0;

    uint32_t draw()
    {
        return bench_xorshift32(&state);
    }

    void round()
    {
        std::map<std::string, std::unique_ptr<Record>> by_name;
        std::list<Record *> order;
        for (uint32_t i = 0; i < records; i++)
            add(by_name, order);
        // A third replaced: erased from both containers, a new one added.
        for (uint32_t i = 0; i < records / 3; i++) {
            Record *victim = order.front();
            order.pop_front();
            by_name.erase(victim->name);
            add(by_name, order);
        }
    }

    void add(std::map<std::string, std::unique_ptr<Record>> &by_name, std::list<Record *> &order)
    {
        std::unique_ptr<Record> record(new Record(draw(), 0));
        created++;
        // Names collide; a number makes them unique.
        record->name += std::to_string(created);
        order.push_back(record.get());
        by_name.emplace(record->name, std::move(record));
    }

    void run()
    {
        for (long r = 0; r < rounds; r++)
            round();
    }
};

} // namespace

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 400, 1},
        {"records", 5000, 3},
        {"threads", 1, 1},
        {"seed", 2463534242, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    uint32_t seed = bench_seed(argv[0], params[3].value);
    std::vector<Churner> churners;
    for (long t = 0; t < params[2].value; t++) {
        uint32_t thread_seed = seed + 0x9E3779B9u * static_cast<uint32_t>(t);
        churners.push_back(Churner{params[0].value, static_cast<uint32_t>(params[1].value),
                                   thread_seed != 0 ? thread_seed : 1});
    }

    double start = bench_now();
    std::vector<std::thread> threads;
    for (size_t t = 1; t < churners.size(); t++)
        threads.emplace_back(&Churner::run, &churners[t]);
    churners[0].run();
    for (std::thread &thread : threads)
        thread.join();
    double seconds = bench_now() - start;

    long created = 0;
    for (const Churner &churner : churners)
        created += churner.created;
    bench_report("cxx_churn", static_cast<double>(created), seconds, params, count);
    return 0;
}
