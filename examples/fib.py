def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number (0, 1, 1, 2, 3, 5, ...)."""
    if n < 2:
        return n
    return 


if __name__ == "__main__":
    print([fibonacci(i) for i in range(10)])
