// Moves request-sized messages over one loopback TCP connection at a fixed rate, with no HTTP and no server: the
// bytes that binary V2 requests carry, alone. A sender thread writes each message from one buffer (as a load
// generator does); a receiver thread reads each into one of 32 buffers in turn (as a server reads bodies into fresh
// request buffers). Run beside the engine alone, it shows what moving the bodies costs the compute on a shared machine.
//
// usage: transfer RATE SECONDS [BYTES]   (messages per second; BYTES defaults to one 3x224x224 float32 image)
// Prints the messages sent and the process's CPU seconds on stderr when done.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static size_t size = 3 * 224 * 224 * 4;
static int receiving;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *receive(void *unused) {
    (void)unused;
    char *buffers = malloc(32 * size);
    memset(buffers, 0, 32 * size);  // touched once, like a server's pooled request buffers
    for (long index = 0;; index++) {
        char *buffer = buffers + (index % 32) * size;
        for (size_t got = 0; got < size;) {
            ssize_t n = read(receiving, buffer + got, size - got);
            if (n <= 0) return NULL;
            got += (size_t)n;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: transfer RATE SECONDS [BYTES]\n");
        return 2;
    }
    double rate = atof(argv[1]), seconds = atof(argv[2]);
    if (argc > 3) size = (size_t)atol(argv[3]);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 1) ||
        getsockname(listener, (struct sockaddr *)&address, &length)) {
        perror("listen");
        return 1;
    }
    int sending = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sending, (struct sockaddr *)&address, sizeof address) || (receiving = accept(listener, NULL, NULL)) < 0) {
        perror("connect");
        return 1;
    }
    pthread_t reader;
    pthread_create(&reader, NULL, receive, NULL);
    char *message = malloc(size);
    memset(message, 1, size);
    double start = now();
    long sent = 0;
    while (now() - start < seconds) {
        for (size_t done = 0; done < size;) {
            ssize_t n = write(sending, message + done, size - done);
            if (n <= 0) {
                perror("write");
                return 1;
            }
            done += (size_t)n;
        }
        sent++;
        double delay = start + sent / rate - now();
        if (delay > 0) {
            struct timespec pause = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
            nanosleep(&pause, NULL);
        }
    }
    close(sending);
    pthread_join(reader, NULL);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    fprintf(stderr, "sent %ld messages, %.3f CPU s\n", sent,
            usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6);
    return 0;
}
