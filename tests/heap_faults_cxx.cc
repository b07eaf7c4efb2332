// Heap faults of C++'s new and delete, one per process, as heap_faults.c
// does for C (which see): "heap_faults_cxx CASE", "heap_faults_cxx --list".
// Built with -fsized-deallocation, so that delete calls the sized forms.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "heap_faults.h"

namespace
{

template <typename T> T *hide(T *ptr)
{
    T *volatile hidden = ptr;
    return hidden;
}

volatile int destroyed;

// A destructor that does something: new[] stores the element count in
// front of the array, and delete[] reads it back.
struct Object {
    char data[64];
    Object()
    {
        std::memset(data, 'x', sizeof(data));
    }
    ~Object()
    {
        destroyed = destroyed + 1;
    }
};

// A base without a virtual destructor: deleting a Derived through it
// passes the sized delete the base's size.
struct Base {
    long id = 1;
};

struct Derived : Base {
    char more[200] = {};
};

void carry_on()
{
    Object *objects[4];
    for (auto &object : objects) {
        object = new Object;
    }
    for (auto *object : objects) {
        delete object;
    }
}

void sized_delete_wrong_size()
{
    Base *base = hide<Base>(new Derived);
    delete base;
    carry_on();
}

void delete_of_array()
{
    Object *array = hide(new Object[4]);
    delete array;
    carry_on();
}

void array_delete_of_single()
{
    Object *object = hide(new Object);
    delete[] object;
    carry_on();
}

void double_delete()
{
    Object *object = new Object;
    Object *again = hide(object);
    delete object;
    delete again;
    carry_on();
}

void delete_stack_object()
{
    Object local;
    delete hide(&local);
    carry_on();
}

struct Fault {
    const char *name;
    void (*commit)();
};

const Fault faults[] = {
    {"sized_delete_wrong_size", sized_delete_wrong_size}, {"delete_of_array", delete_of_array},
    {"array_delete_of_single", array_delete_of_single},   {"double_delete", double_delete},
    {"delete_stack_object", delete_stack_object},
};

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && !std::strcmp(argv[1], "--list")) {
        for (const Fault &fault : faults) {
            std::printf("%s\n", fault.name);
        }
        return 0;
    }
    if (argc != 2) {
        std::fprintf(stderr, "usage: heap_faults_cxx --list | heap_faults_cxx CASE\n");
        return FAULT_SETUP_ERROR;
    }
    alarm(10);
    for (const Fault &fault : faults) {
        if (!std::strcmp(argv[1], fault.name)) {
            fault.commit();
            end_case(FAULT_NOT_CAUGHT, "NOT CAUGHT");
        }
    }
    std::fprintf(stderr, "unknown case %s\n", argv[1]);
    return FAULT_SETUP_ERROR;
}
