#include "block_link.h"

#include <string.h>
#include <sys/auxv.h>

#include "../fault.h"
#include "../harden.h"
#include "size_class.h"

struct hak_link_keys hak_link_keys HAK_START_UP;

/* 1 decodes with its low bits set under any key: 1 at level 0, 14 under the
 * others, whose low four bits are 15. */
const struct hak_list_end hak_list_end = {{1, 0}};

void hak_block_link_init(void)
{
    const unsigned char *random = (const unsigned char *)getauxval(AT_RANDOM);
    uintptr_t words[2] = {0x9e3779b97f4a7c15u, 0xc2b2ae3d27d4eb4fu};
    if (random)
        memcpy(words, random, sizeof(words));
    /* Level 0: plain links, which the shared decoding leaves as they are. */
    hak_link_keys.link = hak_harden.level ? words[0] | 0xf : 0;
    hak_link_keys.free_tag = words[1] ? words[1] : 1;
    hak_link_keys.canary = (words[0] ^ words[1]) * 0x9e3779b97f4a7c15u;
}

void *hak_fatal_corrupted_link(const void *block)
{
    hak_fatal("corrupted free list (a freed block was written to) at", block);
}

void hak_fatal_double_free(const void *block, unsigned cls)
{
    char note[16] = "class ";
    hak_class_name(cls, note + 6);
    hak_fatal_note("double free of", block, note);
}
