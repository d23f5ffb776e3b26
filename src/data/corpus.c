/* The built-in corpus generator (see corpus.h). A sentence is built from templates over
 * fixed word lists; every random choice is one Philox word taken modulo the list length
 * (integer-only, identical everywhere). Word lists and templates are part of the corpus:
 * changing them changes the pinned digest in tests/data/test_corpus.c. */
#include "data/corpus.h"

#include "core/philox.h"

#include <stdlib.h>
#include <string.h>

typedef struct gen {
    uint8_t *buf;
    size_t pos, cap;
    uint64_t draw;  /* index of the next Philox word */
    int cap_next;   /* capitalise the next word */
    int need_space; /* a space goes before the next word */
} gen;

/* Every draw is its own statement (or initialiser): C leaves the order of evaluating a
 * call's arguments unspecified, so two draws in one argument list would make the text
 * depend on the compiler.
 *
 * Uniform choice in [0, n). The modulo bias (< n / 2^32) is irrelevant for a corpus. */
static unsigned pick(gen *g, unsigned n) {
    return dt_rng_u32(DT_CORPUS_SEED, DT_RNG_CORPUS, 0, 0, g->draw++) % n;
}

/* Skewed choice in [0, n): the smaller of two draws, so early list entries are common and
 * late ones rare, roughly like word frequencies in real text. */
static unsigned pick_skew(gen *g, unsigned n) {
    unsigned a = pick(g, n), b = pick(g, n);
    return a < b ? a : b;
}

static int chance(gen *g, unsigned percent) { return pick(g, 100) < percent; }

static void put(gen *g, char c) {
    if (g->pos < g->cap) g->buf[g->pos++] = (uint8_t)c;
}

static void word(gen *g, const char *w) {
    if (g->need_space) put(g, ' ');
    for (const char *p = w; *p; p++) {
        char c = *p;
        if (p == w && g->cap_next && c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        put(g, c);
    }
    g->cap_next = 0;
    g->need_space = 1;
}

/* Punctuation attaches to the previous word. */
static void punct(gen *g, const char *s) {
    for (const char *p = s; *p; p++) put(g, *p);
}

#define N(a) ((unsigned)(sizeof(a) / sizeof((a)[0])))

/* ---- word lists -------------------------------------------------------------------- */

typedef struct { const char *sg, *pl; } noun;
typedef struct { const char *base, *s, *past; } verb;

static const noun beings[] = {
    {"cat", "cats"}, {"dog", "dogs"}, {"child", "children"}, {"bird", "birds"},
    {"farmer", "farmers"}, {"teacher", "teachers"}, {"fox", "foxes"}, {"girl", "girls"},
    {"boy", "boys"}, {"old man", "old men"}, {"woman", "women"}, {"king", "kings"},
    {"queen", "queens"}, {"sailor", "sailors"}, {"baker", "bakers"}, {"horse", "horses"},
    {"owl", "owls"}, {"mouse", "mice"}, {"wolf", "wolves"}, {"doctor", "doctors"},
    {"painter", "painters"}, {"friend", "friends"}, {"neighbour", "neighbours"},
    {"rabbit", "rabbits"}, {"goat", "goats"}, {"student", "students"},
};

static const noun things[] = {
    {"book", "books"}, {"apple", "apples"}, {"letter", "letters"}, {"boat", "boats"},
    {"basket", "baskets"}, {"lamp", "lamps"}, {"key", "keys"}, {"box", "boxes"},
    {"cup", "cups"}, {"song", "songs"}, {"stone", "stones"}, {"bell", "bells"},
    {"map", "maps"}, {"coat", "coats"}, {"loaf of bread", "loaves of bread"},
    {"flower", "flowers"}, {"ball", "balls"}, {"candle", "candles"}, {"hat", "hats"},
    {"story", "stories"}, {"picture", "pictures"}, {"ring", "rings"}, {"kite", "kites"},
};

static const char *const places[] = {
    "the garden", "the river", "the market", "the old bridge", "the forest", "the house",
    "the village", "the hill", "the sea", "the school", "the kitchen", "the road",
    "the mountain", "the harbour", "the field", "the city", "the window", "the tower",
    "the lake", "the barn", "the station", "the library",
};

static const char *const preps[] = {
    "near", "in", "by", "behind", "under", "beside", "across", "over", "along",
    "past", "toward", "inside", "around",
};

static const char *const adjs[] = {
    "small", "old", "little", "quiet", "happy", "bright", "green", "brave", "tired",
    "clever", "dark", "warm", "red", "gentle", "busy", "young", "strange", "heavy",
    "wooden", "golden", "wild", "kind", "sleepy", "empty", "proud", "lonely", "round",
};

static const verb trans[] = {
    {"see", "sees", "saw"}, {"find", "finds", "found"}, {"take", "takes", "took"},
    {"like", "likes", "liked"}, {"carry", "carries", "carried"},
    {"watch", "watches", "watched"}, {"follow", "follows", "followed"},
    {"want", "wants", "wanted"}, {"bring", "brings", "brought"}, {"hold", "holds", "held"},
    {"keep", "keeps", "kept"}, {"lose", "loses", "lost"}, {"open", "opens", "opened"},
    {"paint", "paints", "painted"}, {"help", "helps", "helped"}, {"hear", "hears", "heard"},
    {"remember", "remembers", "remembered"}, {"meet", "meets", "met"},
    {"visit", "visits", "visited"}, {"feed", "feeds", "fed"}, {"call", "calls", "called"},
    {"build", "builds", "built"}, {"clean", "cleans", "cleaned"},
};

static const verb intrans[] = {
    {"sleep", "sleeps", "slept"}, {"sing", "sings", "sang"}, {"walk", "walks", "walked"},
    {"wait", "waits", "waited"}, {"run", "runs", "ran"}, {"laugh", "laughs", "laughed"},
    {"rest", "rests", "rested"}, {"work", "works", "worked"}, {"sit", "sits", "sat"},
    {"dance", "dances", "danced"}, {"swim", "swims", "swam"}, {"smile", "smiles", "smiled"},
    {"listen", "listens", "listened"}, {"play", "plays", "played"},
};

static const char *const adverbs[] = {
    "quietly", "slowly", "again", "together", "quickly", "happily", "carefully", "often",
    "alone", "today", "early", "every day",
};

static const char *const names[] = {
    "Anna", "Tom", "Maria", "Ben", "Lucy", "Omar", "Mira", "Jack", "Nora", "Leo", "Ivy",
    "Sam", "Eva", "Hugo", "Rosa", "Finn",
};

/* Time phrases; the ones from PAST_TIMES on only go with the past tense. */
static const char *const times[] = {
    "in the morning", "at night", "every day", "after the rain", "on Sunday", "in winter",
    "in the evening", "in spring", "at noon", "long ago", "later that day", "one day",
    "yesterday",
};
#define PAST_TIMES 9u

static const char *const det_sg[] = {"the", "a", "the", "this", "my", "that", "our", "every"};
static const char *const det_pl[] = {"the", "some", "the", "two", "many", "these", "three",
                                     "my", "those", "our"};
/* After "there is/are": indefinite determiners only. */
static const char *const indef_sg[] = {"a"};
static const char *const indef_pl[] = {"some", "two", "three", "many", "a few"};

/* ---- phrases ----------------------------------------------------------------------- */

/* Subject classes decide the verb form: 3rd person singular takes "sees"/"is"/"was";
 * plural, "you" and "we" take "see"/"are"/"were"; "I" takes "see"/"am"/"was". */
enum { SG3, PLURAL, FIRST_SG };

static int starts_with_vowel(const char *w) { return strchr("aeiou", w[0]) != NULL; }

/* det [adj] noun, singular or plural, with a definite-or-any (indef = 0) or an
 * indefinite (indef = 1) determiner; "a" becomes "an" before a vowel. */
static void noun_phrase_det(gen *g, const noun *list, unsigned n, int plural, int indef) {
    const noun *nn = &list[pick_skew(g, n)];
    const char *adj = chance(g, 40) ? adjs[pick_skew(g, N(adjs))] : NULL;
    const char *next = adj ? adj : (plural ? nn->pl : nn->sg);
    const char *det;
    if (indef) det = plural ? indef_pl[pick(g, N(indef_pl))] : indef_sg[0];
    else det = plural ? det_pl[pick(g, N(det_pl))] : det_sg[pick(g, N(det_sg))];
    if (!strcmp(det, "a") && starts_with_vowel(next)) det = "an";
    word(g, det);
    if (adj) word(g, adj);
    word(g, plural ? nn->pl : nn->sg);
}

static void noun_phrase(gen *g, const noun *list, unsigned n, int plural) {
    noun_phrase_det(g, list, n, plural, 0);
}

/* A subject; returns its agreement class. */
static int subject(gen *g) {
    unsigned r = pick(g, 100);
    if (r < 20) {
        word(g, names[pick_skew(g, N(names))]);
        return SG3;
    }
    if (r < 32) {
        static const char *const pro[] = {"he", "she", "they", "we", "I", "you", "it"};
        static const int cls[] = {SG3, SG3, PLURAL, PLURAL, FIRST_SG, PLURAL, SG3};
        unsigned i = pick(g, N(pro));
        word(g, pro[i]);
        return cls[i];
    }
    int plural = chance(g, 35);
    noun_phrase(g, beings, N(beings), plural);
    return plural ? PLURAL : SG3;
}

static void object(gen *g) {
    unsigned r = pick(g, 100);
    if (r < 12) {
        word(g, names[pick_skew(g, N(names))]);
    } else if (r < 22) {
        static const char *const pro[] = {"him", "her", "them", "us", "me", "it"};
        word(g, pro[pick(g, N(pro))]);
    } else if (r < 45) {
        noun_phrase(g, beings, N(beings), chance(g, 35));
    } else {
        noun_phrase(g, things, N(things), chance(g, 35));
    }
}

static void verb_form(gen *g, const verb *v, int cls, int past) {
    word(g, past ? v->past : (cls == SG3 ? v->s : v->base));
}

static void be_form(gen *g, int cls, int past) {
    if (past) word(g, cls == PLURAL ? "were" : "was");
    else word(g, cls == SG3 ? "is" : cls == PLURAL ? "are" : "am");
}

static void place_phrase(gen *g) {
    word(g, preps[pick_skew(g, N(preps))]);
    word(g, places[pick_skew(g, N(places))]);
}

/* subject + predicate, with optional place, adverb and time. */
static void clause(gen *g, int past) {
    int cls = subject(g);
    unsigned r = pick(g, 100);
    if (r < 45) {
        verb_form(g, &trans[pick_skew(g, N(trans))], cls, past);
        object(g);
    } else if (r < 75) {
        verb_form(g, &intrans[pick_skew(g, N(intrans))], cls, past);
    } else {
        be_form(g, cls, past);
        if (chance(g, 50)) word(g, adjs[pick_skew(g, N(adjs))]);
        else place_phrase(g);
        return;
    }
    if (chance(g, 45)) place_phrase(g);
    if (chance(g, 20)) word(g, adverbs[pick(g, N(adverbs))]);
}

static void question(gen *g, int past) {
    if (chance(g, 40)) {
        static const char *const wh[] = {"where", "why", "when"};
        word(g, wh[pick(g, N(wh))]);
    }
    /* do/does/did + subject + base verb */
    int plural = chance(g, 35);
    int use_name = chance(g, 30);
    word(g, past ? "did" : (plural && !use_name ? "do" : "does"));
    if (use_name) word(g, names[pick_skew(g, N(names))]);
    else noun_phrase(g, beings, N(beings), plural);
    if (chance(g, 55)) {
        word(g, trans[pick_skew(g, N(trans))].base);
        object(g);
    } else {
        word(g, intrans[pick_skew(g, N(intrans))].base);
        if (chance(g, 50)) place_phrase(g);
    }
    punct(g, "?");
}

static void sentence(gen *g) {
    g->cap_next = 1;
    int past = chance(g, 55);
    unsigned r = pick(g, 100);
    if (r < 38) {
        clause(g, past);
        punct(g, ".");
    } else if (r < 55) {
        static const char *const conj[] = {"and", "but", "so", "because", "while", "when"};
        clause(g, past);
        punct(g, ",");
        word(g, conj[pick(g, N(conj))]);
        clause(g, past);
        punct(g, ".");
    } else if (r < 67) {
        unsigned t = pick(g, N(times));
        word(g, times[t]);
        punct(g, ",");
        clause(g, past || t >= PAST_TIMES);
        punct(g, ".");
    } else if (r < 77) {
        question(g, past);
    } else if (r < 89) {
        /* dialogue: "The dog is tired," said Anna. / "Did Tom sing?" asked Leo. */
        if (g->need_space) put(g, ' ');
        put(g, '"');
        g->need_space = 0;
        g->cap_next = 1;
        int asked = chance(g, 35);
        if (asked) {
            question(g, past);
            punct(g, "\"");
        } else {
            clause(g, past);
            punct(g, ",\"");
        }
        static const char *const said[] = {"said", "replied", "whispered", "shouted"};
        word(g, asked ? "asked" : said[pick(g, N(said))]);
        word(g, names[pick_skew(g, N(names))]);
        punct(g, ".");
    } else {
        int plural = chance(g, 40);
        word(g, "there");
        word(g, past ? (plural ? "were" : "was") : (plural ? "are" : "is"));
        if (chance(g, 50)) noun_phrase_det(g, beings, N(beings), plural, 1);
        else noun_phrase_det(g, things, N(things), plural, 1);
        place_phrase(g);
        punct(g, ".");
    }
}

void dt_corpus_fill(uint8_t *buf, size_t n) {
    gen g = {buf, 0, n, 0, 1, 0};
    while (g.pos < g.cap) {
        unsigned len = 3 + pick(&g, 5); /* sentences per paragraph */
        for (unsigned i = 0; i < len && g.pos < g.cap; i++) sentence(&g);
        punct(&g, "\n\n");
        g.need_space = 0;
    }
}

dt_status dt_corpus_tokens(uint16_t **out, uint64_t *n) {
    *out = NULL;
    *n = 0;
    uint8_t *bytes = malloc(DT_CORPUS_BYTES);
    uint16_t *tok = malloc(DT_CORPUS_BYTES * sizeof *tok);
    if (!bytes || !tok) {
        free(bytes);
        free(tok);
        return dt_fail(DT_ENOMEM, "built-in corpus: cannot allocate %u tokens",
                       DT_CORPUS_BYTES);
    }
    dt_corpus_fill(bytes, DT_CORPUS_BYTES);
    for (size_t i = 0; i < DT_CORPUS_BYTES; i++) tok[i] = bytes[i];
    free(bytes);
    *out = tok;
    *n = DT_CORPUS_BYTES;
    return DT_OK;
}
