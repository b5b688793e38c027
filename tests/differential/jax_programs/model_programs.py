def programs():
    return []
