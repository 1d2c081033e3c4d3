import React from 'react';
import type { Book } from '../model/book';

interface BookListProps {
  books: Book[];
  onLend: (book: Book) => void;
}

export function BookList({ books, onLend }: BookListProps) {
  return (
    <ul className="books">
      {books.map((book) => (
        <li key={book.id}>
          {book.describe()}
          <button disabled={!book.isAvailable()} onClick={() => onLend(book)}>
            Lend
          </button>
        </li>
      ))}
    </ul>
  );
}
