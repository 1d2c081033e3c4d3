import { Book } from '../model/book';
import { InMemoryRepository } from './repository';

export class BookRepository extends InMemoryRepository<Book> {
  findByIsbn(isbn: string): Book | undefined {
    return this.all().find((book) => book.isbn === isbn);
  }

  byAuthor(author: string): Book[] {
    return this.all().filter((book) => book.author === author);
  }

  available(): Book[] {
    return this.all().filter((book) => book.isAvailable());
  }
}
